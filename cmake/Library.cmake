# The library users link: libringd.so, the public headers (include/ringd/ and the generated
# ringd/config.h) and a CMake package, so that `find_package(ringd)` gives C++ programs and the
# Python extension the same core the `ringd` command is built from (ringd_core, whole).
#
#   cmake --install build --prefix /opt/ringd      # bin/ringd, lib/libringd.so*, include/ringd,
#                                                 # lib/cmake/ringd/ringdConfig.cmake
# In this build tree the same library is the target ringd::ringd.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Its sources are the objects of ringd_core's layers (RINGD_CORE_LAYERS: compiled once, with -fPIC
# like everything here); linking ringd_core as well brings their dependencies (MPI, protobuf,
# CUDA and NCCL where built), and nothing of the archive itself, whose every symbol is already
# defined. The training model and the parameter servers are not in it (see CMakeLists.txt).
set(_ringd_library_objects)
foreach(layer ${RINGD_CORE_LAYERS})
  list(APPEND _ringd_library_objects $<TARGET_OBJECTS:ringd_${layer}>)
endforeach()
add_library(ringd_library SHARED ${_ringd_library_objects})
add_library(ringd::ringd ALIAS ringd_library)
set_target_properties(ringd_library PROPERTIES
  OUTPUT_NAME ringd
  EXPORT_NAME ringd
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)
target_link_libraries(ringd_library PRIVATE ringd_core)
target_link_libraries(ringd_library PUBLIC Threads::Threads)
target_include_directories(ringd_library PUBLIC
  $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include>
  $<BUILD_INTERFACE:${CMAKE_BINARY_DIR}/generated>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(ringd_library PUBLIC cxx_std_20)

install(TARGETS ringd_library EXPORT ringdTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/ringd DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_BINARY_DIR}/generated/ringd/config.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ringd)
set(RINGD_PACKAGE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ringd)
install(EXPORT ringdTargets NAMESPACE ringd:: DESTINATION ${RINGD_PACKAGE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/ringdConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/package/ringdConfig.cmake
                              INSTALL_DESTINATION ${RINGD_PACKAGE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/package/ringdConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/package/ringdConfig.cmake
              ${CMAKE_BINARY_DIR}/package/ringdConfigVersion.cmake
        DESTINATION ${RINGD_PACKAGE_DIR})
