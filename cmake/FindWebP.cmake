# Finds libwebp and its demuxer (libwebpdemux): the imported targets
# WebP::webp and WebP::webpdemux. CMake has no module of its own for them,
# and Debian's libwebp-dev ships no CMake config; WebP_LIBRARY,
# WebP_DEMUX_LIBRARY and WebP_INCLUDE_DIR may be set to pick other copies
# (STOKER_STATIC_DEPS does). Installed next to stoker-config.cmake, which uses
# it to find the same libraries for a project that links stoker.
find_path(WebP_INCLUDE_DIR webp/decode.h)
find_library(WebP_LIBRARY NAMES webp)
find_library(WebP_DEMUX_LIBRARY NAMES webpdemux)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(WebP REQUIRED_VARS WebP_LIBRARY WebP_DEMUX_LIBRARY WebP_INCLUDE_DIR)
mark_as_advanced(WebP_INCLUDE_DIR WebP_LIBRARY WebP_DEMUX_LIBRARY)
if(WebP_FOUND AND NOT TARGET WebP::webp)
  add_library(WebP::webp UNKNOWN IMPORTED)
  set_target_properties(WebP::webp PROPERTIES IMPORTED_LOCATION "${WebP_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${WebP_INCLUDE_DIR}")
  add_library(WebP::webpdemux UNKNOWN IMPORTED)
  set_target_properties(WebP::webpdemux PROPERTIES IMPORTED_LOCATION "${WebP_DEMUX_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${WebP_INCLUDE_DIR}" INTERFACE_LINK_LIBRARIES WebP::webp)
endif()
