# cronoq-bench sim --quick --plot DIR with no gnuplot to be found: it must
# succeed, write every data file and the script, and say how to get the
# charts. Run by ctest (bench/CMakeLists.txt).
file(REMOVE_RECURSE ${WORK_DIR})
set(ENV{CRONOQ_GNUPLOT} "cronoq-no-such-gnuplot")
execute_process(
  COMMAND ${BENCH} sim --quick --no-progress --jobs 200 --plot ${WORK_DIR}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cronoq-bench failed (${rc}):\n${out}\n${err}")
endif()
if(NOT out MATCHES "gnuplot is not installed: apt-get install gnuplot-nox")
  message(FATAL_ERROR "no advice on getting the charts:\n${out}")
endif()
foreach(pool machine rack)
  foreach(f makespan-${pool}.dat util-${pool}-libcronoq.dat
            util-${pool}-strict-fifo.dat util-${pool}-greedy.dat
            util-${pool}-static-split.dat waits-${pool}-cpu-only-libcronoq.dat)
    if(NOT EXISTS ${WORK_DIR}/${f})
      message(FATAL_ERROR "missing ${f}")
    endif()
  endforeach()
endforeach()
file(READ ${WORK_DIR}/plots.gp script)
foreach(png utilisation-machine waits-machine makespan-machine
            utilisation-rack waits-rack makespan-rack)
  if(NOT script MATCHES "${png}.png")
    message(FATAL_ERROR "plots.gp does not draw ${png}.png")
  endif()
endforeach()
file(GLOB pngs ${WORK_DIR}/*.png)
if(pngs)
  message(FATAL_ERROR "charts drawn without gnuplot: ${pngs}")
endif()
