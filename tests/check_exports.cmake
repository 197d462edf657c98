# The export check: every symbol the core's shared library (LIB) defines
# and exports starts with cq_ (and none with cq__, the internal prefix).
# With UV_LIB, the libuv adapter's shared library too: none of its symbols
# is one the core defines as well (the adapter is built on the core's
# public API, with no core source in it), and all start with cq_uv_.
# With FLEET_LIB, the fleet pool's likewise, all starting with cq_fleet_.
# Variables: NM, LIB, UV_LIB, FLEET_LIB (optional).
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

# An add-on library: none of its symbols is one the core defines too (it
# is built on the core's public API), and all match `allowed`.
function(check_addon lib allowed what)
  exported_symbols(${lib} syms)
  set(both "")
  foreach(sym IN LISTS syms)
    if(sym IN_LIST core)
      list(APPEND both ${sym})
    endif()
  endforeach()
  refuse("${both}" "defined by both ${LIB} and ${lib}")
  set(stray ${syms})
  list(FILTER stray EXCLUDE REGEX "${allowed}")
  refuse("${stray}" "${lib} exports symbols outside ${what}")
  list(LENGTH syms n)
  message(STATUS "${lib}: ${n} exported symbols, all ${what}, none the core's")
endfunction()

if(UV_LIB)
  check_addon(${UV_LIB} "^cq_uv_" "cq_uv_")
endif()
if(FLEET_LIB)
  check_addon(${FLEET_LIB} "^cq_fleet_" "cq_fleet_")
endif()
