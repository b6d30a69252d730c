# Read by cpack at packaging time. The units and configuration paths are fixed when the build
# is configured, so a Debian package needs a build configured for /usr.
if(CPACK_GENERATOR STREQUAL "DEB" AND NOT CPACK_VERDICT_CONFIGURED_PREFIX STREQUAL "/usr")
  message(FATAL_ERROR "Debian packages need a build configured with -DCMAKE_INSTALL_PREFIX=/usr "
                      "(this one has '${CPACK_VERDICT_CONFIGURED_PREFIX}')")
endif()
