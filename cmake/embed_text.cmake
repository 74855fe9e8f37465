# Writes OUT, a C++ source defining `const char* const ddp::detail::${NAME}` as the text of IN
# (a raw string literal; IN must not contain the delimiter `)ddp_embed"`).
# Usage: cmake -DIN=file -DOUT=file.cpp -DNAME=kSymbol -P embed_text.cmake
file(READ "${IN}" content)
string(FIND "${content}" ")ddp_embed\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )ddp_embed\"")
endif()
file(WRITE "${OUT}.tmp"
  "// Generated from ${IN} by cmake/embed_text.cmake; do not edit.\n"
  "namespace ddp::detail {\nextern const char* const ${NAME};\n"
  "const char* const ${NAME} = R\"ddp_embed(${content})ddp_embed\";\n}  // namespace ddp::detail\n")
file(RENAME "${OUT}.tmp" "${OUT}")
