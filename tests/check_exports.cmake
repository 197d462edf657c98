# The export check: every symbol the core's shared library (LIB) defines
# and exports starts with cq_ (and none with cq__, the internal prefix).
# With UV_LIB, the libuv adapter's shared library too: none of its symbols
# is one the core defines as well (the adapter is built on the core's
# public API, with no core source in it), and all start with cq_uv_.
# Variables: NM, LIB, UV_LIB (optional).
cmake_policy(VERSION 3.16)

# The symbols `lib` defines and exports, into `out`.
function(exported_symbols lib out)
  execute_process(COMMAND ${NM} -D --defined-only ${lib}
    OUTPUT_VARIABLE text RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nm failed on ${lib}")
  endif()
  string(REPLACE "\n" ";" lines "${text}")
  set(syms "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^[0-9a-fA-F]+ ([A-Za-z]) (.+)$" AND
       NOT CMAKE_MATCH_1 STREQUAL "A") # A: version nodes
      list(APPEND syms ${CMAKE_MATCH_2})
    endif()
  endforeach()
  if(NOT syms)
    message(FATAL_ERROR "no exported symbols found in ${lib}")
  endif()
  set(${out} ${syms} PARENT_SCOPE)
endfunction()

# Fails naming `what` unless `list` is empty.
function(refuse list what)
  if(list)
    string(REPLACE ";" ", " list "${list}")
    message(FATAL_ERROR "${what}: ${list}")
  endif()
endfunction()

exported_symbols(${LIB} core)
set(stray ${core})
list(FILTER stray EXCLUDE REGEX "^cq_")
set(internal ${core})
list(FILTER internal INCLUDE REGEX "^cq__")
list(APPEND stray ${internal})
refuse("${stray}" "${LIB} exports symbols outside cq_")
list(LENGTH core n)
message(STATUS "${LIB}: ${n} exported symbols, all cq_")

if(UV_LIB)
  exported_symbols(${UV_LIB} adapter)
  set(both "")
  foreach(sym IN LISTS adapter)
    if(sym IN_LIST core)
      list(APPEND both ${sym})
    endif()
  endforeach()
  refuse("${both}" "defined by both ${LIB} and ${UV_LIB}")
  set(stray ${adapter})
  list(FILTER stray EXCLUDE REGEX "^cq_uv_")
  refuse("${stray}" "${UV_LIB} exports symbols outside cq_uv_")
  list(LENGTH adapter n)
  message(STATUS "${UV_LIB}: ${n} exported symbols, all cq_uv_, none the "
    "core's")
endif()
