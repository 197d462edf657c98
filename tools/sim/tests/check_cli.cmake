# The simulator's command end to end, on small runs: what its options add
# on top of the library, each behaviour checked on the command's output.
# MODE says which (tools/sim/CMakeLists.txt registers one test per mode);
# SIM is cronoq-sim, or cronoq-bench for the mode that checks that it runs
# the same suites.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# run(<expected exit code> args...): the output (stdout and stderr) in `out`
function(run want)
  execute_process(COMMAND ${SIM} ${ARGN} --no-progress
    RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  if(NOT rc EQUAL want)
    message(FATAL_ERROR "cronoq-sim ${ARGN}: exit ${rc}, expected ${want}:\n${o}\n${e}")
  endif()
  set(out "${o}${e}" PARENT_SCOPE)
endfunction()

function(expect text)
  string(FIND "${out}" "${text}" at)
  if(at LESS 0)
    message(FATAL_ERROR "expected \"${text}\" in:\n${out}")
  endif()
endfunction()

if(MODE STREQUAL "plot")
  # --plot DIR with no gnuplot to be found: the run succeeds, writes every
  # data file and the script, and says how to get the charts.
  set(ENV{CRONOQ_GNUPLOT} "cronoq-no-such-gnuplot")
  run(0 sim --quick --jobs 200 --plot ${WORK_DIR})
  expect("gnuplot is not installed: apt-get install gnuplot-nox")
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
elseif(MODE STREQUAL "bench_suites")
  # cronoq-bench keeps the simulator's commands: `sim` and `backfill` run
  # the suites of the simulator library and print their tables and goals.
  foreach(suite sim backfill)
    run(0 ${suite} --quick --jobs 100 --pool machine --load 0.8)
    expect("== ${suite}: machine pool (8 GPUs")
  endforeach()
  expect("multi-GPU max wait, f in [1,3]")
elseif(MODE STREQUAL "refusals")
  run(2 sim --pool cluster)
  expect("--pool takes machine or rack, not 'cluster'")
  run(2 sim --load many)
  expect("--load takes a number in [0.01, 100], not 'many'")
  run(2 sim --frobnicate)
  expect("cronoq-sim: unknown argument '--frobnicate'")
  run(0 --help)
  expect("usage: cronoq-sim [sim|backfill|all] [options]")
  expect("--limit-factor LO[-HI]")
else()
  message(FATAL_ERROR "unknown MODE '${MODE}'")
endif()
