# The Debian package (scripts/package.sh runs `cpack -G DEB` in a tree configured with
# -DCMAKE_INSTALL_PREFIX=/usr -DDDP_PACKAGE_VERSION=<project version>+<commits>.g<commit>).
# Depends: computed by dpkg-shlibdeps from the binaries' shared libraries (SHLIBDEPS), plus the two
# that no binary links: python3 (the ddprun package in dist-packages; the agent runs .py entry
# points under it) and adduser (postinst makes the system user ddprund).
set(DDP_PACKAGE_VERSION "${PROJECT_VERSION}" CACHE STRING "Version of the Debian package")
set(DDP_PACKAGE_DATE "" CACHE STRING "Date of the package's changelog entry (RFC 2822)")
set(DDP_PACKAGE_MAINTAINER "ddprun developers <ddprun@example.org>" CACHE STRING
    "Maintainer field of the Debian package")

# Debian wants a copyright file and a changelog in /usr/share/doc/<package>.
install(FILES scripts/package/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT docs)
if(DDP_PACKAGE_DATE STREQUAL "")
  string(TIMESTAMP DDP_PACKAGE_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
endif()
file(WRITE ${CMAKE_BINARY_DIR}/install/changelog
  "ddprun (${DDP_PACKAGE_VERSION}) unstable; urgency=medium\n\n"
  "  * Built from ddprun's source tree; its history is git's.\n\n"
  " -- ${DDP_PACKAGE_MAINTAINER}  ${DDP_PACKAGE_DATE}\n")
execute_process(COMMAND gzip -9nf ${CMAKE_BINARY_DIR}/install/changelog)
install(FILES ${CMAKE_BINARY_DIR}/install/changelog.gz DESTINATION ${CMAKE_INSTALL_DOCDIR}
        COMPONENT docs)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ddprun)
set(CPACK_PACKAGE_VERSION ${DDP_PACKAGE_VERSION})
set(CPACK_PACKAGE_CONTACT ${DDP_PACKAGE_MAINTAINER})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "elastic launcher for distributed training, a drop-in for torchrun")
# The long description (CPack puts the summary above it and indents it).
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
"ddprun starts one elastic agent per node that runs a training program as
N workers with torchrun's environment contract, joins a rendezvous that
survives the loss of any node, restarts failed workers and prints a
job-wide failure summary. torchrun's command lines work unchanged.
.
The package holds ddprun (the agent), ddprund (a rendezvous store daemon
speaking PyTorch's c10d TCPStore protocol, with a systemd unit), train
(a reference data-parallel trainer, CPU build) and the ddprun Python
package for PyTorch scripts.")
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "python3, adduser")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/scripts/package/postinst ${PROJECT_SOURCE_DIR}/scripts/package/prerm
    ${PROJECT_SOURCE_DIR}/scripts/package/postrm ${PROJECT_SOURCE_DIR}/scripts/package/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
set(CPACK_STRIP_FILES TRUE)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS
    OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
include(CPack)
