# Tri-state options (AUTO|ON|OFF) and the configure-time feature summary.
#
# ddpscope_tristate(NAME DOC) declares a cache string that accepts AUTO, ON or OFF.
# ddpscope_feature(NAME ON|OFF REASON) records one line for the summary printed at the end.

function(ddpscope_tristate name doc)
  set(${name} AUTO CACHE STRING "${doc} (AUTO|ON|OFF)")
  set_property(CACHE ${name} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${${name}}" value)
  if(NOT value MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${name}=${${name}}: expected AUTO, ON or OFF")
  endif()
  set(${name} "${value}" PARENT_SCOPE)
endfunction()

set_property(GLOBAL PROPERTY DDPSCOPE_FEATURES "")

function(ddpscope_feature name enabled reason)
  if(enabled)
    set(mark "yes")
  else()
    set(mark "no ")
  endif()
  set_property(GLOBAL APPEND PROPERTY DDPSCOPE_FEATURES "  ${mark}  ${name}: ${reason}")
endfunction()

# Decides whether an optional part is built. `found` says whether its dependencies
# were found, `why_not` what is missing. Fails configure when the option is ON and
# the part cannot be built. Sets <var> to TRUE/FALSE in the parent scope.
function(ddpscope_resolve var option found why_not)
  if(${option} STREQUAL "OFF")
    set(${var} FALSE PARENT_SCOPE)
    ddpscope_feature(${option} OFF "disabled (${option}=OFF)")
  elseif(found)
    set(${var} TRUE PARENT_SCOPE)
  elseif(${option} STREQUAL "ON")
    message(FATAL_ERROR "${option}=ON but ${why_not}")
  else()
    set(${var} FALSE PARENT_SCOPE)
    ddpscope_feature(${option} OFF "skipped: ${why_not}")
  endif()
endfunction()

function(ddpscope_print_summary)
  get_property(lines GLOBAL PROPERTY DDPSCOPE_FEATURES)
  message(STATUS "")
  message(STATUS "ddpscope ${PROJECT_VERSION} configuration summary (${CMAKE_BUILD_TYPE}):")
  foreach(line IN LISTS lines)
    message(STATUS "${line}")
  endforeach()
  message(STATUS "")
endfunction()

# ddpscope_forbid_links(TARGET LIB...) fails the configure when any LIB is in TARGET's link
# closure (LINK_LIBRARIES, then every library's INTERFACE_LINK_LIBRARIES and, for static
# libraries, LINK_LIBRARIES, recursively). Enforces docs/design.md §2's dependency rules at build time.
function(ddpscope_forbid_links target)
  set(forbidden ${ARGN})
  get_target_property(pending ${target} LINK_LIBRARIES)
  set(seen "")
  while(pending)
    list(POP_FRONT pending lib)
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" lib "${lib}")
    if(NOT lib OR lib IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${lib})
    if(lib IN_LIST forbidden)
      message(FATAL_ERROR "${target} links ${lib}, which docs/design.md §2 forbids (sim and runtime never depend on each other; runtime_cpu and runtime_cuda depend on runtime_graph, never on each other; nothing depends on cli; python binds the core libraries only)")
    endif()
    if(TARGET ${lib})
      foreach(property LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
        get_target_property(more ${lib} ${property})
        if(more)
          list(APPEND pending ${more})
        endif()
      endforeach()
    endif()
  endwhile()
endfunction()
