# `cmake --install` and the Debian package (scripts/package.sh, CPack DEB): what goes where.
#
#   <prefix>/bin/ddprun, ddprund, train
#   <prefix>/${DDP_PYTHON_INSTALL_DIR}/ddprun          the Python package (default
#                                                       lib/python3/dist-packages: Debian's python3
#                                                       finds it there when the prefix is /usr)
#   <prefix>/lib/ddprun/python/ddprun -> that folder   what the agent puts on its workers' PYTHONPATH
#                                                       (launcher/cli/python_package.hpp), so a venv
#                                                       without system site-packages imports it too
#   <prefix>/share/man/man1/ddprun.1.gz, train.1.gz, man8/ddprund.8.gz   from --help (help2man)
#   <prefix>/share/bash-completion/completions/ddprun, ddprund   generated from --help
#   <prefix>/share/doc/ddprun/                          README, docs/, examples/ (a trainer config,
#                                                       a PyTorchJob manifest)
#   <prefix>/lib/systemd/system/ddprund.service         the daemon as a service (docs/deploy.md)
#   /etc/default/ddprund                                its flags (with prefix /usr; else <prefix>/etc)
#
# Nothing installed names the build tree: the agent finds the package from its own location, and
# the unit's ExecStart is the installed ddprund.
include(GNUInstallDirs)

set(DDP_PYTHON_INSTALL_DIR "lib/python3/dist-packages" CACHE STRING
    "Where the ddprun Python package is installed, relative to the prefix")
set(DDP_MAN_PAGES "AUTO" CACHE STRING "Generate man pages with help2man: AUTO, ON or OFF")
set_property(CACHE DDP_MAN_PAGES PROPERTY STRINGS AUTO ON OFF)

install(TARGETS ddprun ddprund train RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT programs)
if(TARGET ddp_train_cuda)
  # lib, not the multiarch libdir: train dlopens <its bin>/../lib/libddp_train_cuda.so
  install(TARGETS ddp_train_cuda LIBRARY DESTINATION lib COMPONENT programs)
endif()

# -- the Python package, and the agent's link to it --
install(DIRECTORY worker_runtime/python/ddprun DESTINATION ${DDP_PYTHON_INSTALL_DIR}
        COMPONENT python PATTERN __pycache__ EXCLUDE PATTERN "*.pyc" EXCLUDE)
cmake_path(RELATIVE_PATH DDP_PYTHON_INSTALL_DIR BASE_DIRECTORY lib/ddprun/python
           OUTPUT_VARIABLE ddp_python_link)
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/install/python-link)
file(CREATE_LINK ${ddp_python_link}/ddprun ${CMAKE_BINARY_DIR}/install/python-link/ddprun SYMBOLIC)
install(FILES ${CMAKE_BINARY_DIR}/install/python-link/ddprun DESTINATION lib/ddprun/python
        COMPONENT python)

# -- man pages and bash completion, generated from --help at build time (target ddp_docs) --
set(ddp_gen ${CMAKE_BINARY_DIR}/install)
find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_custom_command(
  OUTPUT ${ddp_gen}/completions/ddprun ${ddp_gen}/completions/ddprund
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/package/make_completion.py
          --bin-dir $<TARGET_FILE_DIR:ddprun> --out-dir ${ddp_gen}/completions
  DEPENDS ddprun ddprund ${PROJECT_SOURCE_DIR}/scripts/package/make_completion.py
  COMMENT "ddprun: bash completion from --help")
set(ddp_doc_outputs ${ddp_gen}/completions/ddprun ${ddp_gen}/completions/ddprund)
find_program(DDP_HELP2MAN help2man)
if(DDP_MAN_PAGES STREQUAL "ON" AND NOT DDP_HELP2MAN)
  message(FATAL_ERROR "DDP_MAN_PAGES=ON but help2man was not found (apt-get install help2man)")
endif()
# One man page from a program's --help and its include file (NAME, FILES, SEE ALSO).
function(ddp_man_page program section include)
  set(page ${ddp_gen}/man/${program}.${section})
  add_custom_command(
    OUTPUT ${page}.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${ddp_gen}/man
    # Through PATH, so the page says "ddprund", never the build tree's path. Prepended when the
    # command runs, never baked in from the configuring shell: a reconfigure under another PATH
    # (the README test's quick start) changed the rule, and CMake deletes the outputs of a changed
    # rule (CMakeFiles/CMakeRuleHashes.txt) — the man pages vanished from a built tree.
    COMMAND ${CMAKE_COMMAND} -E env --modify PATH=path_list_prepend:$<TARGET_FILE_DIR:ddprun>
            ${DDP_HELP2MAN} --no-info --section=${section}
            --include=${PROJECT_SOURCE_DIR}/${include} --output=${page} ${program}
    COMMAND gzip -9nf ${page}
    DEPENDS ${program} ${PROJECT_SOURCE_DIR}/${include}
    COMMENT "ddprun: ${program}(${section}) from --help")
  set(ddp_doc_outputs ${ddp_doc_outputs} ${page}.gz PARENT_SCOPE)
  install(FILES ${page}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section} COMPONENT docs)
endfunction()
if(DDP_HELP2MAN AND NOT DDP_MAN_PAGES STREQUAL "OFF")
  ddp_man_page(ddprun 1 scripts/package/ddprun.h2m)
  ddp_man_page(ddprund 8 scripts/package/ddprund.h2m)
  ddp_man_page(train 1 scripts/package/train.h2m)
else()
  message(STATUS "ddprun: no man pages (help2man not found or DDP_MAN_PAGES=OFF)")
endif()
add_custom_target(ddp_docs ALL DEPENDS ${ddp_doc_outputs})
install(FILES ${ddp_gen}/completions/ddprun ${ddp_gen}/completions/ddprund
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions COMPONENT docs)

# -- documentation and examples --
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT docs)
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT docs
        FILES_MATCHING PATTERN "*.md")
install(FILES configs/quickstart.json configs/pytorchjob.yaml
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT docs)

# -- ddprund as a system service --
configure_file(scripts/package/ddprund.service.in ${ddp_gen}/ddprund.service @ONLY)
install(FILES ${ddp_gen}/ddprund.service DESTINATION lib/systemd/system COMPONENT service)
# /etc with prefix /usr (the package), else <prefix>/etc, so `cmake --install --prefix P` writes
# under P only. The unit's ExecStart names the prefix given at configure time.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(ddp_sysconfdir /etc)
else()
  set(ddp_sysconfdir ${CMAKE_INSTALL_SYSCONFDIR})
endif()
install(FILES scripts/package/ddprund.default DESTINATION ${ddp_sysconfdir}/default
        RENAME ddprund COMPONENT service)
