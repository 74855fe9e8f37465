# Build speed on a small machine: a unity build, line-level debug info, ccache when installed, and
# (off by default) precompiled headers for the heavy third-party headers. Measured in
# docs/development.md#build-time; each part can be switched (-DDDP_UNITY=OFF,
# -DDDP_DEBUG_INFO=full, -DDDP_CCACHE=OFF, -DDDP_PCH=ON) and the programs do the same.

# -- unity build: each target's C++ files are compiled in batches of 8 (one translation unit per
#    batch), so Boost.Asio/Beast, spdlog/fmt and nlohmann/json are parsed and instantiated once per
#    batch, not once per file: the quick start's build needs 45% less compiler CPU. One file's
#    change recompiles its batch (-DDDP_UNITY=OFF while editing one file over and over). In a batch
#    a file sees the earlier files' declarations: helpers in anonymous namespaces have names of
#    their own, and a helper left unused (a call that now resolves to another function, e.g. one
#    found through argument-dependent lookup) is an error, not a warning.
option(DDP_UNITY "Compile each target's C++ files in batches of 8" ON)
set(CMAKE_UNITY_BUILD ${DDP_UNITY})
set(CMAKE_UNITY_BUILD_BATCH_SIZE 8)
if(DDP_UNITY)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Werror=unused-function>)
endif()

# -- debug info of RelWithDebInfo (the default build type): "lines" (-g1: function names, files and
#    line numbers, what backtraces, gdb's `bt` and ddprun's stack dumps of hung workers show) or
#    "full" (-g: also types and local variables). Full debug info costs 27% more compiler CPU.
set(DDP_DEBUG_INFO "lines" CACHE STRING "RelWithDebInfo's debug info: lines (-g1) or full (-g)")
set_property(CACHE DDP_DEBUG_INFO PROPERTY STRINGS lines full)
if(NOT DDP_DEBUG_INFO MATCHES "^(lines|full)$")
  message(FATAL_ERROR "DDP_DEBUG_INFO must be lines or full, not '${DDP_DEBUG_INFO}'")
endif()
if(DDP_DEBUG_INFO STREQUAL "lines")
  # After CMAKE_CXX_FLAGS_RELWITHDEBINFO's -g on the command line: the last -g level counts.
  add_compile_options($<$<AND:$<CONFIG:RelWithDebInfo>,$<COMPILE_LANGUAGE:C,CXX>>:-g1>)
endif()

# -- ccache: only when nobody chose a launcher (-DCMAKE_CXX_COMPILER_LAUNCHER=..., or the
#    CMAKE_CXX_COMPILER_LAUNCHER environment variable, which CMake reads on the first configure).
option(DDP_CCACHE "Compile through ccache when it is installed and no compiler launcher is set" ON)
if(DDP_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(DDP_CCACHE_PROGRAM ccache)
  if(DDP_CCACHE_PROGRAM)
    set(CMAKE_CXX_COMPILER_LAUNCHER ${DDP_CCACHE_PROGRAM})
    if(NOT CMAKE_CUDA_COMPILER_LAUNCHER)
      set(CMAKE_CUDA_COMPILER_LAUNCHER ${DDP_CCACHE_PROGRAM})
    endif()
  endif()
endif()
# What scripts/build.sh prints beside the build time.
set(DDP_COMPILER_LAUNCHER "${CMAKE_CXX_COMPILER_LAUNCHER}" CACHE INTERNAL "C++ compiler launcher")
message(STATUS "ddprun: compiler launcher: ${CMAKE_CXX_COMPILER_LAUNCHER}")


# -- precompiled header (GCC): Boost.Asio, spdlog/fmt and nlohmann/json, which most library files
#    include, are compiled once per build into ddp_pch, which the libraries and binaries reuse
#    (REUSE_FROM). GCC uses a PCH only under the flags and macros it was made with (CMake passes
#    -Winvalid-pch: a mismatch is a warning, never a wrong build), so a target with flags of its own
#    (ddp_trainer: -O3) does not reuse it. Measured (docs/development.md#build-time): -8 to -9% of
#    CPU on the Asio files; loading the ~200 MB PCH costs ~1.5 s of CPU per file, so the tests (one
#    small file per program) do not use one: with Catch2 in a PCH they compiled 12-15% slower. Off
#    by default: with it GCC 12 warns where it does not without (-Wstringop-overread in
#    launcher/cli/slurm_nodelist.cpp), and the gain is small.
option(DDP_PCH "Precompile Boost.Asio, spdlog and nlohmann/json once per build (GCC)" OFF)
set(DDP_PCH_HEADERS
  <boost/asio/io_context.hpp> <boost/asio/ip/tcp.hpp> <boost/asio/post.hpp>
  <boost/asio/steady_timer.hpp> <spdlog/spdlog.h> <nlohmann/json.hpp>
  <chrono> <functional> <map> <memory> <mutex> <optional> <string> <thread> <vector>)

# The ccache settings a PCH needs (ccache's manual, "Precompiled headers"); without them ccache
# compiles every file that reuses a PCH without caching it.
set(DDP_PCH_LAUNCHER "${CMAKE_CXX_COMPILER_LAUNCHER}")
if(CMAKE_CXX_COMPILER_LAUNCHER MATCHES "ccache")
  set(DDP_PCH_LAUNCHER ${CMAKE_COMMAND} -E env
      CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
      ${CMAKE_CXX_COMPILER_LAUNCHER})
endif()

# ddp_add_pch(<name> [LIBS <targets...>] HEADERS <headers...>): a library that compiles
# nothing but the precompiled header <name> (when DDP_PCH is on and the compiler is GCC).
function(ddp_add_pch name)
  cmake_parse_arguments(P "" "" "LIBS;HEADERS" ${ARGN})
  if(NOT DDP_PCH OR NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    return()
  endif()
  set(src ${CMAKE_BINARY_DIR}/generated/${name}.cpp)
  file(CONFIGURE OUTPUT ${src} CONTENT "// Carries the precompiled header ${name}.\n")
  add_library(${name} STATIC ${src})
  target_link_libraries(${name} PRIVATE
    Boost::headers spdlog::spdlog nlohmann_json::nlohmann_json Threads::Threads ${P_LIBS})
  target_precompile_headers(${name} PRIVATE ${P_HEADERS})
  set_target_properties(${name} PROPERTIES CXX_COMPILER_LAUNCHER "${DDP_PCH_LAUNCHER}")
endfunction()

# ddp_use_pch(<pch> <target>...): these targets reuse the precompiled header <pch>, and get the
# usage requirements it was made with (the macros of spdlog's package among them).
function(ddp_use_pch pch)
  if(NOT TARGET ${pch})
    return()
  endif()
  foreach(t ${ARGN})
    target_precompile_headers(${t} REUSE_FROM ${pch})
    target_link_libraries(${t} PRIVATE
      Boost::headers spdlog::spdlog nlohmann_json::nlohmann_json Threads::Threads)
    set_target_properties(${t} PROPERTIES CXX_COMPILER_LAUNCHER "${DDP_PCH_LAUNCHER}")
  endforeach()
endfunction()

ddp_add_pch(ddp_pch HEADERS ${DDP_PCH_HEADERS})
