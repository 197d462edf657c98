# CRONOQ_SANITIZE is checked at configure time (cmake/sanitize.cmake): each
# value below is tried in script mode, which needs no compiler, and one bad
# value once more on the project itself, configured (not built) in a
# throwaway directory, to show that the top-level CMakeLists.txt stops on it.
# Variables: SOURCE_DIR, WORK_DIR, GENERATOR, C_COMPILER, CXX_COMPILER.
cmake_policy(VERSION 3.16)

set(script ${SOURCE_DIR}/cmake/sanitize.cmake)
set(failures "")

# Runs the script with `value` on compilers `c_id` and `cxx_id`; `expect`
# is "ok:<flags>" (prints -fsanitize=<flags>, or "no sanitizer" when empty)
# or "refused:<regex>" (fails, its message matching <regex>).
function(try value c_id cxx_id expect)
  execute_process(
    COMMAND ${CMAKE_COMMAND} "-DCRONOQ_SANITIZE=${value}"
            "-DC_COMPILER_ID=${c_id}" "-DCXX_COMPILER_ID=${cxx_id}"
            -P ${script}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REGEX REPLACE "[ \t\r\n]+" " " err "${err}")
  set(what "'${value}' on ${c_id}/${cxx_id}")
  if(expect MATCHES "^ok:(.*)$")
    set(flags "${CMAKE_MATCH_1}")
    if(flags STREQUAL "")
      set(want "no sanitizer")
    else()
      set(want "-fsanitize=${flags}")
    endif()
    if(NOT rc EQUAL 0 OR NOT err MATCHES "^ ?${want} ?$")
      string(APPEND failures "\n  ${what}: expected ${want}, got rc ${rc}: "
        "${err}")
      set(failures "${failures}" PARENT_SCOPE)
    endif()
  elseif(expect MATCHES "^refused:(.*)$")
    set(pattern "${CMAKE_MATCH_1}")
    if(rc EQUAL 0 OR NOT err MATCHES "CRONOQ_SANITIZE='" OR
       NOT err MATCHES "${pattern}")
      string(APPEND failures "\n  ${what}: expected a refusal matching "
        "'${pattern}', got rc ${rc}: ${err}")
      set(failures "${failures}" PARENT_SCOPE)
    endif()
  else()
    message(FATAL_ERROR "bad expectation ${expect}")
  endif()
endfunction()

# Accepted, on gcc and on clang.
foreach(id GNU Clang)
  try("" ${id} ${id} "ok:")
  try("address" ${id} ${id} "ok:address")
  try("undefined" ${id} ${id} "ok:undefined")
  try("address;undefined" ${id} ${id} "ok:address,undefined")
  try("undefined;address" ${id} ${id} "ok:undefined,address")
  try("thread" ${id} ${id} "ok:thread")
endforeach()
try("thread" AppleClang AppleClang "ok:thread")
# No sanitizer needs no particular compiler.
try("" MSVC MSVC "ok:")

# Refused: thread with another, unknown names, wrong separators, repeats.
try("thread;address" GNU GNU "refused:thread goes alone")
try("address;thread" Clang Clang "refused:thread goes alone")
try("thread;undefined" GNU GNU "refused:thread goes alone")
try("memory" Clang Clang "refused:'memory' is not a sanitizer")
try("Address" GNU GNU "refused:'Address' is not a sanitizer")
try("ON" GNU GNU "refused:'ON' is not a sanitizer")
try("address,undefined" GNU GNU "refused:separate the sanitizers with ';'")
try("address;" GNU GNU "refused:an empty entry")
try("address;address" GNU GNU "refused:each sanitizer at most once")
# Refused: a compiler that is not gcc or clang, for C or for C++.
try("address" MSVC MSVC "refused:needs gcc or clang; the compiler here is MSVC")
try("thread" GNU Intel "refused:needs gcc or clang; the compiler here is Intel")

# The project itself stops at configure time on a bad value.
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR} -G ${GENERATOR}
          -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
          "-DCRONOQ_SANITIZE=address;thread"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(REMOVE_RECURSE ${WORK_DIR})
string(REGEX REPLACE "[ \t\r\n]+" " " err "${err}")
if(rc EQUAL 0 OR NOT err MATCHES "CRONOQ_SANITIZE='address;thread': thread goes alone")
  string(APPEND failures "\n  the project configured with "
    "CRONOQ_SANITIZE='address;thread': rc ${rc}: ${err}")
endif()

if(failures)
  message(FATAL_ERROR "CRONOQ_SANITIZE checks failed:${failures}")
endif()
message(STATUS "CRONOQ_SANITIZE: every value accepted or refused as listed")
