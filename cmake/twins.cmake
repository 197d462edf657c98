# The fleet pool's Lua follows the in-process pool's C: a Lua function
# that carries out what a C function does says so on the line before it,
#
#   -- twin: src/queue.c examine()
#
# and this check fails when the named file, or a definition of the named
# function in it, is not there, so that a renamed or deleted C function
# cannot leave its twin pointing at nothing. src/fleet/lua/README.md is
# the table of twins.
#
# A definition is a line that starts at the first column, names the
# function before "(", and holds no ";" (a prototype or a call does).
#
# Usage: cmake -DSOURCE_DIR=<top> -P twins.cmake, or include() it and call
# cronoq_check_twins(<top>). With -DRENAME=<function> it checks a copy of
# the tree in which that C function is renamed, and succeeds only when
# the check then fails naming it (the test check_twins_fails_on_a_rename).

# The problems of the twin comments of the Lua files under <top>, checked
# against the C files under <root>, in out; the number of twins in
# out_count.
function(_cq_twin_problems top root out out_count)
  file(GLOB _lua ${top}/src/fleet/lua/*.lua ${top}/src/fleet/lua/lib/*.lua)
  set(_problems "")
  set(_count 0)
  foreach(_file IN LISTS _lua)
    file(STRINGS ${_file} _lines REGEX "^[ ]*-- twin:")
    file(RELATIVE_PATH _rel ${top} ${_file})
    foreach(_line IN LISTS _lines)
      if(NOT _line MATCHES "^[ ]*-- twin: ([^ ]+) ([A-Za-z_][A-Za-z0-9_]*)\\(\\)$")
        list(APPEND _problems "${_rel}: \"${_line}\" is not \"-- twin: <file> <function>()\"")
        continue()
      endif()
      set(_c ${CMAKE_MATCH_1})
      set(_fn ${CMAKE_MATCH_2})
      math(EXPR _count "${_count} + 1")
      if(NOT EXISTS ${root}/${_c})
        list(APPEND _problems "${_rel}: its twin ${_c} ${_fn}(): there is no ${_c}")
        continue()
      endif()
      file(STRINGS ${root}/${_c} _defs
        REGEX "^([A-Za-z_][^;(]*[ *])?${_fn}\\([^;]*$")
      if(NOT _defs)
        list(APPEND _problems "${_rel}: its twin ${_c} ${_fn}(): ${_c} defines no ${_fn}()")
      endif()
    endforeach()
  endforeach()
  set(${out} "${_problems}" PARENT_SCOPE)
  set(${out_count} ${_count} PARENT_SCOPE)
endfunction()

function(cronoq_check_twins top)
  _cq_twin_problems(${top} ${top} _problems _count)
  if(_problems)
    string(REPLACE ";" "\n  " _text "${_problems}")
    message(FATAL_ERROR "the fleet's Lua names C twins that are not there "
      "(src/fleet/lua/README.md):\n  ${_text}")
  endif()
  if(_count EQUAL 0)
    message(FATAL_ERROR "no twin comment in src/fleet/lua: the check reads nothing")
  endif()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND SOURCE_DIR)
  if(NOT RENAME)
    cronoq_check_twins(${SOURCE_DIR})
    return()
  endif()
  # A copy of src/ with RENAME's definitions and calls renamed: the check
  # must then name it.
  string(RANDOM LENGTH 8 _tag)
  set(_copy ${CMAKE_CURRENT_BINARY_DIR}/twins-${_tag})
  file(COPY ${SOURCE_DIR}/src DESTINATION ${_copy})
  file(GLOB_RECURSE _c ${_copy}/src/*.c ${_copy}/src/*.h)
  set(_renamed 0)
  foreach(_file IN LISTS _c)
    file(READ ${_file} _text)
    string(REGEX REPLACE "([^A-Za-z0-9_])${RENAME}\\(" "\\1${RENAME}_renamed("
      _new "${_text}")
    if(NOT _new STREQUAL _text)
      file(WRITE ${_file} "${_new}")
      math(EXPR _renamed "${_renamed} + 1")
    endif()
  endforeach()
  _cq_twin_problems(${SOURCE_DIR} ${_copy} _problems _count)
  file(REMOVE_RECURSE ${_copy})
  if(_renamed EQUAL 0)
    message(FATAL_ERROR "no C file has ${RENAME}(): nothing was renamed")
  endif()
  string(REPLACE ";" "\n  " _text "${_problems}")
  if(NOT _text MATCHES "defines no ${RENAME}\\(\\)")
    message(FATAL_ERROR "${RENAME}() renamed in ${_renamed} files, and the "
      "twin check did not name it: \"${_text}\"")
  endif()
  message(STATUS "with ${RENAME}() renamed, the twin check fails:\n  ${_text}")
endif()
