# CRONOQ_SANITIZE, checked at configure time: the sanitizers every target
# is built with. Accepted are exactly
#
#   ""                  none
#   address             AddressSanitizer
#   undefined           UndefinedBehaviorSanitizer
#   address;undefined   both (in either order)
#   thread              ThreadSanitizer, which goes alone
#
# and any of them only on gcc or clang, whose -fsanitize= flags these are.
# Anything else stops the configure step with a message that says why, so
# that a misspelt value never builds without the sanitizer it asked for.
#
# Usage: include() it and call
#   cronoq_sanitize_flags(<value> <C compiler id> <C++ compiler id> <out>)
# which sets <out> to the -fsanitize= argument ("address,undefined"), or to
# "" for none; or, to try a value without a project,
#   cmake -DCRONOQ_SANITIZE=<value> -DC_COMPILER_ID=<id>
#         [-DCXX_COMPILER_ID=<id>] -P sanitize.cmake
# which prints "-fsanitize=<flags>" (or "no sanitizer").
cmake_policy(VERSION 3.16)

function(cronoq_sanitize_flags value c_id cxx_id out)
  if(value STREQUAL "")
    set(${out} "" PARENT_SCOPE)
    return()
  endif()
  set(_how "It must be empty, address, undefined, 'address;undefined' or thread")
  foreach(_name IN LISTS value)
    if(NOT _name MATCHES "^(address|undefined|thread)$")
      if(_name MATCHES ",")
        message(FATAL_ERROR "CRONOQ_SANITIZE='${value}': separate the "
          "sanitizers with ';', not ','. ${_how}.")
      endif()
      if(_name STREQUAL "")
        message(FATAL_ERROR "CRONOQ_SANITIZE='${value}': an empty entry. "
          "${_how}.")
      endif()
      message(FATAL_ERROR "CRONOQ_SANITIZE='${value}': '${_name}' is not a "
        "sanitizer this build knows. ${_how}.")
    endif()
  endforeach()
  if("thread" IN_LIST value AND NOT value STREQUAL "thread")
    message(FATAL_ERROR "CRONOQ_SANITIZE='${value}': thread goes alone "
      "(ThreadSanitizer cannot share a build with AddressSanitizer, and this "
      "build pairs it with nothing else). ${_how}.")
  endif()
  if(NOT value MATCHES "^(address|undefined|thread|address;undefined|undefined;address)$")
    message(FATAL_ERROR "CRONOQ_SANITIZE='${value}': each sanitizer at "
      "most once. ${_how}.")
  endif()
  foreach(_id IN ITEMS "${c_id}" "${cxx_id}")
    if(NOT _id STREQUAL "" AND NOT _id MATCHES "^(GNU|Clang|AppleClang)$")
      message(FATAL_ERROR "CRONOQ_SANITIZE='${value}' needs gcc or clang; "
        "the compiler here is ${_id}. Configure with CC=gcc or CC=clang "
        "(and CXX), or leave CRONOQ_SANITIZE empty.")
    endif()
  endforeach()
  if(c_id STREQUAL "" AND cxx_id STREQUAL "")
    message(FATAL_ERROR "cronoq_sanitize_flags: no compiler id given")
  endif()
  string(REPLACE ";" "," _flags "${value}")
  set(${out} "${_flags}" PARENT_SCOPE)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  if(NOT DEFINED C_COMPILER_ID)
    message(FATAL_ERROR "usage: cmake -DCRONOQ_SANITIZE=<value> "
      "-DC_COMPILER_ID=<id> [-DCXX_COMPILER_ID=<id>] -P sanitize.cmake")
  endif()
  cronoq_sanitize_flags("${CRONOQ_SANITIZE}" "${C_COMPILER_ID}"
    "${CXX_COMPILER_ID}" _cq_flags)
  if(_cq_flags STREQUAL "")
    message("no sanitizer")
  else()
    message("-fsanitize=${_cq_flags}")
  endif()
endif()
