# cronoq-run is installed with the library, with its man page and its bash
# completion, and runs from the installed tree (its RPATH finds the
# libraries beside it), printing both versions.
# Variables: BUILD_DIR, WORK_DIR, VERSION.
#
# Each component is installed on its own, so that this test writes its own
# install manifests in the build tree and can run beside the packaging test.
file(REMOVE_RECURSE ${WORK_DIR})
foreach(component Unspecified runner)
  execute_process(
    COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}
      --component ${component}
    RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "installing component ${component} failed: ${err}")
  endif()
endforeach()

foreach(f share/man/man1/cronoq-run.1
          share/bash-completion/completions/cronoq-run)
  if(NOT EXISTS ${WORK_DIR}/${f})
    message(FATAL_ERROR "install did not put ${f} in place")
  endif()
endforeach()

unset(ENV{LD_LIBRARY_PATH})
execute_process(COMMAND ${WORK_DIR}/bin/cronoq-run --version
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR
   NOT out STREQUAL "cronoq-run ${VERSION} (libcronoq ${VERSION})\n")
  message(FATAL_ERROR "installed cronoq-run --version: status ${rc}, "
                      "printed '${out}' '${err}'")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
