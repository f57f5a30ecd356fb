# The layers of src/ (docs/architecture.md, "Layers"): one OBJECT library per folder, ringd_<name>,
# linked to the layers it may use. A layer's headers are visible only through its own include root,
# build/layers/<name>/ (holding the link <name> -> src/<name>), which target_link_libraries hands to
# the layers above it and to nobody else: an #include "<name>/..." from a layer below does not
# compile. tests/docs/layers_test.py checks the same order, in every file, against the document.
#
#   ringd_add_layer(<name> [SOURCES <file>...] [DEPENDS <layer>...])
#
# Without SOURCES, the layer is every .cc of src/<name>/ (not of its subfolders). The layers that
# make libringd (ringd_core, cmake/Library.cmake) are listed in RINGD_CORE_LAYERS.
function(ringd_add_layer name)
  cmake_parse_arguments(LAYER "" "" "SOURCES;DEPENDS" ${ARGN})
  if(NOT LAYER_SOURCES)
    file(GLOB LAYER_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${name}/*.cc)
  endif()
  set(root ${CMAKE_BINARY_DIR}/layers/${name})
  file(MAKE_DIRECTORY ${root})
  file(CREATE_LINK ${CMAKE_SOURCE_DIR}/src/${name} ${root}/${name} SYMBOLIC)
  add_library(ringd_${name} OBJECT ${LAYER_SOURCES})
  target_include_directories(ringd_${name} PUBLIC ${root})
  target_compile_options(ringd_${name} PRIVATE ${RINGD_WARNINGS})
  set_target_properties(ringd_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  # __FILE__ (error breadcrumbs) and debug info name src/<name>/..., not the link's path.
  target_compile_options(ringd_${name} PUBLIC
    $<$<COMPILE_LANGUAGE:CXX>:-ffile-prefix-map=${root}/${name}=${CMAKE_SOURCE_DIR}/src/${name}>)
  foreach(dependency ${LAYER_DEPENDS})
    target_link_libraries(ringd_${name} PUBLIC ringd_${dependency})
  endforeach()
endfunction()
