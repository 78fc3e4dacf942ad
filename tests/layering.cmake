# Layering check (docs/design.md §2): every #include "dir/..." in a module's sources must name
# a module that module may depend on, and the core's public headers include no Qt, CUDA, NCCL,
# MPI or nlohmann/json.hpp. Run by ctest as `layering` (cmake -DSOURCE_DIR=... -P this file);
# prints every violation and fails when there is one.
cmake_minimum_required(VERSION 3.25)
set(allowed_base base)
set(allowed_io base io)
set(allowed_models base io models)
set(allowed_ddp base io models ddp)
set(allowed_traces base io traces)
set(allowed_sim base io models ddp traces sim)
set(allowed_runtime base io models ddp traces runtime)
set(allowed_gui base io models ddp traces sim gui)
set(allowed_cli base io models ddp traces sim runtime cli)
set(allowed_python base io models ddp traces sim)
set(modules base io models ddp traces sim runtime gui cli python)

set(violations "")
foreach(module IN LISTS modules)
  file(GLOB_RECURSE sources RELATIVE ${SOURCE_DIR}
       ${SOURCE_DIR}/${module}/*.h ${SOURCE_DIR}/${module}/*.cpp ${SOURCE_DIR}/${module}/*.cu)
  foreach(source IN LISTS sources)
    file(STRINGS ${SOURCE_DIR}/${source} includes REGEX "^#include \"")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^#include \"([^/\"]+)/.*" "\\1" target "${line}")
      if(target STREQUAL line OR NOT target IN_LIST modules)
        continue()  # a same-folder or non-module include
      endif()
      if(NOT target IN_LIST allowed_${module})
        list(APPEND violations "${source}: ${module}/ may not include ${target}/ (${line})")
      endif()
    endforeach()
  endforeach()
endforeach()

# One request layer: the front ends (cli/, gui/, python/) turn named settings into a simulation,
# a sweep or a plan through sim/api (parseSimulationRequest / runSimulation, parseSweepPlan /
# runSweepPlan, parsePlanInput / runPlanInput), never by calling the engine's entry points.
foreach(module gui cli python)
  file(GLOB_RECURSE sources RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/${module}/*.h
       ${SOURCE_DIR}/${module}/*.cpp)
  foreach(source IN LISTS sources)
    file(STRINGS ${SOURCE_DIR}/${source} calls
         REGEX "sim::(simulate|simulateDdp|simulateDataParallel|runSweep|runPlan)\\(")
    foreach(line IN LISTS calls)
      string(STRIP "${line}" line)
      list(APPEND violations "${source}: a front end calls the engine, not sim/api (${line})")
    endforeach()
  endforeach()
endforeach()

# Public headers of the core: no Qt, CUDA, NCCL, MPI or the full nlohmann header. The backend
# folders runtime/cuda, runtime/nccl, runtime/mpi are where those libraries are allowed.
foreach(module base io models ddp traces sim runtime)
  file(GLOB_RECURSE headers RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/${module}/*.h)
  foreach(header IN LISTS headers)
    if(header MATCHES "^runtime/(cuda|nccl|mpi)/")
      continue()
    endif()
    file(STRINGS ${SOURCE_DIR}/${header} includes REGEX "^#include <")
    foreach(line IN LISTS includes)
      if(line MATCHES "<(Q[A-Za-z]*|Qt[A-Za-z]*/.*|cuda.*|cublas.*|nccl.*|mpi.*|nlohmann/json.hpp)>")
        list(APPEND violations "${header}: a core header may not ${line}")
      endif()
    endforeach()
  endforeach()
endforeach()

if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "layering violations:\n  ${text}")
endif()
message(STATUS "layering: every include follows docs/design.md §2's module rules")
