# Installs the build into a scratch prefix, then builds and runs a consumer
# project (tests/consumer/) each supported way: the core through its CMake
# package, add_subdirectory and pkg-config; where the adapter is built
# (WITH_UV), the adapter through the CMake component `uv` and through
# cronoq_uv.pc; and in every build a core-only consumer on a machine where
# pkg-config finds no libuv. Without the adapter, nothing of it may be
# installed.
# Fleet pools likewise (WITH_FLEET): the component `fleet` and
# cronoq_fleet.pc.
# Variables: BUILD_DIR, SOURCE_DIR, WORK_DIR, GENERATOR, C_COMPILER, WITH_UV,
# WITH_FLEET.
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
set(core_files include/cronoq/cronoq.h lib/libcronoq.a lib/pkgconfig/cronoq.pc
    lib/cmake/cronoq/cronoqConfig.cmake lib/cmake/cronoq/cronoqTargets.cmake)
set(uv_files include/cronoq/cronoq_uv.h lib/libcronoq_uv.a
    lib/libcronoq_uv.so lib/pkgconfig/cronoq_uv.pc
    lib/cmake/cronoq/cronoqUvTargets.cmake)
set(fleet_files include/cronoq/cronoq_fleet.h lib/libcronoq_fleet.a
    lib/libcronoq_fleet.so lib/pkgconfig/cronoq_fleet.pc
    lib/cmake/cronoq/cronoqFleetTargets.cmake)
foreach(f IN LISTS core_files)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "install did not put ${f} in place")
  endif()
endforeach()
# An optional part's files: all installed where it is built, none where not.
function(expect_part files built what)
  foreach(f IN LISTS files)
    if(built AND NOT EXISTS ${prefix}/${f})
      message(FATAL_ERROR "install did not put ${f} in place")
    elseif(NOT built AND EXISTS ${prefix}/${f})
      message(FATAL_ERROR "${f} was installed without ${what}")
    endif()
  endforeach()
endfunction()
expect_part("${uv_files}" "${WITH_UV}" "the adapter")
expect_part("${fleet_files}" "${WITH_FLEET}" "fleet pools")

# A pkg-config search path that holds the prefix's files and nothing else:
# no libuv there.
set(no_libuv_dir ${WORK_DIR}/pkgconfig-without-libuv)
file(MAKE_DIRECTORY ${no_libuv_dir})

set(modes find_package core_without_libuv subdirectory pkgconfig)
if(WITH_UV)
  list(APPEND modes find_package_uv pkgconfig_uv)
endif()
if(WITH_FLEET)
  list(APPEND modes find_package_fleet pkgconfig_fleet)
endif()
foreach(mode IN LISTS modes)
  set(bin ${WORK_DIR}/${mode})
  set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
  if(mode STREQUAL "core_without_libuv")
    set(ENV{PKG_CONFIG_LIBDIR} ${no_libuv_dir})
  else()
    unset(ENV{PKG_CONFIG_LIBDIR})
  endif()
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer -B ${bin} -G ${GENERATOR}
      -DCMAKE_C_COMPILER=${C_COMPILER} -DCRONOQ_MODE=${mode}
      -DCRONOQ_SOURCE_DIR=${SOURCE_DIR} -DCMAKE_PREFIX_PATH=${prefix}
      -DCMAKE_BUILD_RPATH=${prefix}/lib)
  run(${CMAKE_COMMAND} --build ${bin})
  set(ENV{LD_LIBRARY_PATH} ${prefix}/lib)
  set(exes consumer)
  if(mode MATCHES "^find_package")
    list(APPEND exes consumer_static)
  elseif(mode STREQUAL "subdirectory" AND WITH_UV)
    list(APPEND exes consumer_uv)
  endif()
  foreach(exe IN LISTS exes)
    run(${bin}/${exe})
  endforeach()
  message(STATUS "${mode}: ok")
endforeach()
unset(ENV{PKG_CONFIG_LIBDIR})
