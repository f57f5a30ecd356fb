# The Python package `ringd`: the extension ringd._core (nanobind, from python/src/) linking
# libringd (ringd::ringd), and the pure-Python part in python/ringd/. pip builds it through
# scikit-build-core (pyproject.toml), which configures this project with RINGD_BUILD_PYTHON=ON,
# builds only the target ringd_python and installs only the component `python`:
#
#   <wheel>/ringd/__init__.py ...        python/ringd/ (pyproject.toml: wheel.packages)
#   <wheel>/ringd/_core.<abi>.so         RPATH $ORIGIN: finds libringd beside it
#   <wheel>/ringd/libringd.so.<soversion> the file _core was linked against, under its SONAME
#
# libringd's other dependencies (protobuf, OpenBLAS, zlib, and MPI/ibverbs where found) are the
# system's, as for `cmake --install`.
find_package(Python 3.9 REQUIRED COMPONENTS Interpreter Development.Module)

# scikit-build-core puts the build environment's site-packages on CMAKE_PREFIX_PATH; a hand-made
# build (cmake -DRINGD_BUILD_PYTHON=ON with nanobind pip-installed for Python_EXECUTABLE) asks it.
find_package(nanobind CONFIG QUIET)
if(NOT nanobind_FOUND)
  execute_process(COMMAND "${Python_EXECUTABLE}" -m nanobind --cmake_dir
                  OUTPUT_VARIABLE RINGD_NANOBIND_DIR OUTPUT_STRIP_TRAILING_WHITESPACE)
  find_package(nanobind CONFIG REQUIRED HINTS "${RINGD_NANOBIND_DIR}")
endif()

file(GLOB RINGD_PYTHON_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/python/src/*.cc)

nanobind_add_module(ringd_python NB_STATIC ${RINGD_PYTHON_SOURCES})
set_target_properties(ringd_python PROPERTIES OUTPUT_NAME _core INSTALL_RPATH "$ORIGIN")
target_compile_options(ringd_python PRIVATE ${RINGD_WARNINGS})
target_link_libraries(ringd_python PRIVATE ringd::ringd)
# The C table shared with ringd's TensorFlow ops (python/ringd/tensorflow/ops.cc, compiled on the
# user's machine against the installed TensorFlow; ringd/tensorflow/_build.py).
target_include_directories(ringd_python PRIVATE ${CMAKE_SOURCE_DIR}/python/ringd/tensorflow)

install(TARGETS ringd_python LIBRARY DESTINATION ringd COMPONENT python)
# libringd under its SONAME only: a wheel (a zip) would store the usual symlinks
# (libringd.so.X.Y -> libringd.so.X.Y.Z) as two copies of the library. install(FILES) copies the
# file as built, so what install(TARGETS) would do is done here: drop the build-tree RUNPATH
# (libringd finds its dependencies where the system keeps them) and strip it under --strip.
get_target_property(_ringd_soversion ringd_library SOVERSION)
get_target_property(_ringd_output_name ringd_library OUTPUT_NAME)
set(_ringd_wheel_library
    ${CMAKE_SHARED_LIBRARY_PREFIX}${_ringd_output_name}${CMAKE_SHARED_LIBRARY_SUFFIX}.${_ringd_soversion})
install(FILES $<TARGET_FILE:ringd_library> DESTINATION ringd COMPONENT python
        RENAME ${_ringd_wheel_library})
install(CODE "
  set(_library \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/ringd/${_ringd_wheel_library}\")
  file(RPATH_REMOVE FILE \"\${_library}\")
  if(CMAKE_INSTALL_DO_STRIP)
    execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-unneeded \"\${_library}\")
  endif()" COMPONENT python)

# In a build tree of our own (not pip's), the package is assembled in build/python/ringd: _core and
# links to python/ringd/'s files, so `PYTHONPATH=build/python` imports it without installing, and
# the ctest `python_tests` runs tests/python (pytest) against it, with the interpreter it was built
# for (scripts/python_env.sh's, which has torch and pytest).
if(NOT SKBUILD)
  set(RINGD_PYTHON_PACKAGE_DIR ${CMAKE_BINARY_DIR}/python/ringd)
  set_target_properties(ringd_python PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${RINGD_PYTHON_PACKAGE_DIR})
  file(MAKE_DIRECTORY ${RINGD_PYTHON_PACKAGE_DIR})
  file(GLOB _ringd_python_entries CONFIGURE_DEPENDS LIST_DIRECTORIES true
       ${CMAKE_SOURCE_DIR}/python/ringd/*)
  foreach(_entry ${_ringd_python_entries})
    get_filename_component(_name ${_entry} NAME)
    if(NOT _name STREQUAL "__pycache__")
      file(CREATE_LINK ${_entry} ${RINGD_PYTHON_PACKAGE_DIR}/${_name} SYMBOLIC)
    endif()
  endforeach()
  if(RINGD_BUILD_TESTS)
    add_test(NAME python_tests
             COMMAND ${Python_EXECUTABLE} -m pytest -q -p no:cacheprovider
                     ${CMAKE_SOURCE_DIR}/tests/python
             WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
    set_tests_properties(python_tests PROPERTIES TIMEOUT 600 LABELS python
      ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;PYTHONDONTWRITEBYTECODE=1;TEST_RINGD_INPLACE=1")
    # The examples still run against the package (one process, a few steps; their figures are
    # bench/compare_pytorch.sh's).
    add_test(NAME python_example_synthetic
             COMMAND ${Python_EXECUTABLE} ${CMAKE_SOURCE_DIR}/examples/pytorch/synthetic_benchmark.py
                     --profile resnet50 --compute-ms 0 --num-warmup-batches 1 --num-iters 1
                     --num-batches-per-iter 2)
    add_test(NAME python_example_fashion_mnist
             COMMAND ${Python_EXECUTABLE} ${CMAKE_SOURCE_DIR}/examples/pytorch/fashion_mnist.py
                     --epochs 1 --limit-train 2048 --threads 1)
    add_test(NAME python_example_tf_synthetic
             COMMAND ${Python_EXECUTABLE} ${CMAKE_SOURCE_DIR}/examples/tensorflow/synthetic_benchmark.py
                     --profile resnet50 --compute-ms 0 --num-warmup-batches 1 --num-iters 1
                     --num-batches-per-iter 2)
    add_test(NAME python_example_keras_fashion_mnist
             COMMAND ${Python_EXECUTABLE}
                     ${CMAKE_SOURCE_DIR}/examples/tensorflow/keras_fashion_mnist.py
                     --epochs 1 --limit-train 2048 --threads 1)
    set_tests_properties(python_example_synthetic python_example_fashion_mnist
                         python_example_tf_synthetic python_example_keras_fashion_mnist PROPERTIES
      TIMEOUT 300 LABELS python ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;OMP_NUM_THREADS=1")
  endif()
endif()
