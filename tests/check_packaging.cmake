# Installs the build into a scratch prefix, then builds and runs a consumer
# project with find_package, with add_subdirectory and with pkg-config.
# Variables: BUILD_DIR, SOURCE_DIR, WORK_DIR, GENERATOR, C_COMPILER.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${cmd}\n${out}\n${err}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f include/cronoq/cronoq.h lib/libcronoq.a lib/pkgconfig/cronoq.pc
          lib/cmake/cronoq/cronoqConfig.cmake)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "install did not put ${f} in place")
  endif()
endforeach()

foreach(mode find_package subdirectory pkgconfig)
  set(bin ${WORK_DIR}/${mode})
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer -B ${bin} -G ${GENERATOR}
      -DCMAKE_C_COMPILER=${C_COMPILER} -DCRONOQ_MODE=${mode}
      -DCRONOQ_SOURCE_DIR=${SOURCE_DIR} -DCMAKE_PREFIX_PATH=${prefix}
      -DCMAKE_BUILD_RPATH=${prefix}/lib)
  set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
  run(${CMAKE_COMMAND} --build ${bin})
  set(ENV{LD_LIBRARY_PATH} ${prefix}/lib)
  run(${bin}/consumer)
  if(mode STREQUAL "find_package")
    run(${bin}/consumer_static)
  endif()
  message(STATUS "${mode}: ok")
endforeach()
