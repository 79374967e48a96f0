# `cmake --install BUILD --prefix P`: the C++ package. Headers under
# P/include/stoker, the static libraries under P/lib, a CMake package config
# (find_package(stoker CONFIG) -> stoker::stoker, stoker::pack) and a
# pkg-config file (pkg-config --cflags --libs stoker). The libraries are
# static: their dependencies (libjpeg, libpng, zlib, libtiff, libwebp, giflib,
# threads) come with the config
# and the .pc file. tests/install/install_test.sh builds
# examples/cmake_package against an installed copy.
include(CMakePackageConfigHelpers)

install(TARGETS stoker_core stoker_pack EXPORT stokerTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/stoker DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_BINARY_DIR}/include/stoker/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/stoker)
install(EXPORT stokerTargets NAMESPACE stoker:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/stoker)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/stoker-config.cmake.in
                              ${PROJECT_BINARY_DIR}/stoker-config.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/stoker)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/stoker-config-version.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/stoker-config.cmake ${PROJECT_BINARY_DIR}/stoker-config-version.cmake
              ${PROJECT_SOURCE_DIR}/cmake/FindWebP.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/stoker)

# NOTE: the prefix is taken relative to the .pc file, so the file stays right
# under `cmake --install --prefix P` (which overrides CMAKE_INSTALL_PREFIX at
# install time) and when the tree is moved.
file(RELATIVE_PATH STOKER_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
configure_file(${PROJECT_SOURCE_DIR}/cmake/stoker.pc.in ${PROJECT_BINARY_DIR}/stoker.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/stoker.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
