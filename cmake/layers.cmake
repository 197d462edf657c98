# The layers of the source tree, checked at configure time (and again by
# the test check_layers): a file may include only what its layer may use.
#
#   src/util/   leaves: their own headers and the public ones
#   src/text/   specs, detection, metrics: util, their own, the public ones
#   src/uv/     the libuv adapter: its own headers and the public ones
#   src/fleet/  the fleet pool: its own headers and the public ones
#   src/        the core: anything of the core
#
# and within the core, the policy's rule: backfill.h (the policy's clock) is
# the policy's own, and the API files call nothing of queue.c and
# backfill.c but what policy.h declares.
#
# Usage: cmake -DSOURCE_DIR=<top> -P layers.cmake, or include() it and call
# cronoq_check_layers(<top>).

# A header named without a directory is the including file's own: it must
# be beside it.
function(_cq_file_includes file allowed what)
  get_filename_component(_dir ${file} DIRECTORY)
  file(STRINGS ${file} _lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(_line IN LISTS _lines)
    if(_line MATCHES "\"([^\"]*)\"")
      set(_header "${CMAKE_MATCH_1}")
      if(NOT _header MATCHES "${allowed}" OR
         (NOT _header MATCHES "/" AND NOT EXISTS ${_dir}/${_header}))
        message(FATAL_ERROR "${file}: ${what} may not include \"${_header}\"")
      endif()
    endif()
  endforeach()
endfunction()

function(_cq_layer_includes dir allowed what)
  file(GLOB _files ${dir}/*.c ${dir}/*.h)
  foreach(_file IN LISTS _files)
    _cq_file_includes(${_file} "${allowed}" "${what}")
  endforeach()
endfunction()

# The names of the functions a C file defines without `static`.
function(_cq_defined file out)
  file(READ ${file} _text)
  string(REGEX MATCHALL "\n[a-z][a-z0-9_ \\*]* \\**(cq__[a-z0-9_]+)\\(" _defs
    "${_text}")
  set(_names "")
  foreach(_def IN LISTS _defs)
    if(NOT _def MATCHES "^\nstatic" AND _def MATCHES "(cq__[a-z0-9_]+)\\($")
      list(APPEND _names ${CMAKE_MATCH_1})
    endif()
  endforeach()
  set(${out} ${_names} PARENT_SCOPE)
endfunction()

function(cronoq_check_layers top)
  set(src ${top}/src)
  _cq_layer_includes(${src}/util "^(util|cronoq)/" "a util leaf")
  _cq_layer_includes(${src}/text "^(text|util|cronoq)/" "the text layer")
  if(EXISTS ${src}/uv)
    _cq_layer_includes(${src}/uv "^[^/]+$" "the libuv adapter")
  endif()
  # The fleet pool: the public headers and its own. Its constants' writer
  # reads util/hist.h too, to state the histogram's layout once.
  file(GLOB _fleet ${src}/fleet/*.c ${src}/fleet/*.h)
  foreach(_file IN LISTS _fleet)
    if(_file MATCHES "/lua_consts\\.c$")
      _cq_file_includes(${_file} "^(cronoq/|util/hist\\.h$|[^/]+$)"
        "the fleet's constants' writer")
    else()
      _cq_file_includes(${_file} "^(cronoq/|[^/]+$)" "the fleet pool")
    endif()
  endforeach()

  # backfill.h: the policy's own.
  file(GLOB _core ${src}/*.c ${src}/*.h)
  foreach(_file IN LISTS _core)
    get_filename_component(_name ${_file} NAME)
    if(_name MATCHES "^(queue\\.c|backfill\\.c|backfill\\.h|cq_internal\\.h)$")
      continue()
    endif()
    file(STRINGS ${_file} _lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"backfill\\.h\"")
    if(_lines)
      message(FATAL_ERROR "${_file}: backfill.h is the policy's own; use policy.h")
    endif()
  endforeach()

  # The API calls the policy only through policy.h.
  _cq_defined(${src}/queue.c _q)
  _cq_defined(${src}/backfill.c _b)
  file(READ ${src}/policy.h _policy)
  foreach(_file grant.c budget.c declare.c device.c pool.c resource.c host.c
                stats.c request.c backend.c)
    if(NOT EXISTS ${src}/${_file})
      continue()
    endif()
    file(READ ${src}/${_file} _text)
    foreach(_fn IN LISTS _q _b)
      if(_text MATCHES "[^a-z0-9_]${_fn}\\(" AND NOT _policy MATCHES "[^a-z0-9_]${_fn}\\(")
        message(FATAL_ERROR "src/${_file} calls ${_fn}(), which policy.h does "
          "not declare: the policy is reached through policy.h only")
      endif()
    endforeach()
  endforeach()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND SOURCE_DIR)
  cronoq_check_layers(${SOURCE_DIR})
  message(STATUS "layers: every include and policy call in its place")
endif()
