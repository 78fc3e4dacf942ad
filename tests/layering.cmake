# Layering check (docs/design.md §2): every #include "dir/..." in a module's sources must name
# a module that module may depend on, runtime/'s sub-libraries include only the runtime parts
# below them (rule below), and the core's public headers include no Qt, CUDA, NCCL, MPI or
# nlohmann/json.hpp. Run by ctest as `layering` (cmake -DSOURCE_DIR=... -P this file); prints
# every violation and fails when there is one. tests/layering_planted.cmake (the ctest
# layering_catches_planted) shows it failing on planted includes.
cmake_minimum_required(VERSION 3.25)
set(allowed_base base)
set(allowed_io base io)
set(allowed_models base io models)
set(allowed_ddp base io models ddp)
set(allowed_traces base io traces)
set(allowed_sim base io models ddp traces sim)
set(allowed_runtime base io models ddp traces runtime)
set(allowed_api base io models ddp traces sim api)
# The front ends see the core through one door, api/ (each verb's request, run and JSON; the
# types those carry), beside base/, io/ (files) and traces/. cli/ may include runtime/ only in
# ddpscope-run's own sources (the runtime front end rule below).
set(allowed_gui base io traces api gui)
set(allowed_cli base io traces api runtime cli)
set(allowed_python base io traces api)
set(modules base io models ddp traces sim api runtime gui cli python)

# runtime/'s sub-libraries, named after their folders (runtime/graph is runtime_graph; the
# top-level runtime/*.h, *.cpp are the engine library, runtime). A runtime source may include
# only the runtime parts allowed_parts_<its part> lists and, where allowed_modules_<its part>
# exists, only those modules (else runtime's module rule above):
# - runtime/graph: the backend-neutral contracts (TrainableModel, GradDevice, the model graph,
#   synthetic data, initial values). base, io and models only; no other runtime part.
# - runtime/cpu and runtime/cuda: the two compute backends, siblings on runtime/graph. Each may
#   include runtime/graph and itself, never the other backend, the engine (runtime/*.h),
#   runtime/mpi or runtime/nccl; nor ddp/ (the Reducer is the engine's).
# - runtime (the engine: Engine, communicators, profiler, training loops): itself,
#   runtime/graph and runtime/cpu (the default model), never runtime/cuda, runtime/mpi,
#   runtime/nccl (the core engine sees no CUDA or MPI).
# - runtime/mpi: the engine and itself. runtime/nccl: the engine, runtime/cuda, runtime/mpi and
#   itself (the NCCL backend wires the CUDA model to the NCCL communicator).
# A new folder under runtime/ needs its line here (it is reported until it has one).
set(runtime_parts runtime runtime_graph runtime_cpu runtime_cuda runtime_mpi runtime_nccl)
set(allowed_modules_runtime_graph base io models runtime)
set(allowed_modules_runtime_cpu base io models traces runtime)
set(allowed_modules_runtime_cuda base io models traces runtime)
set(allowed_parts_runtime runtime runtime_graph runtime_cpu)
set(allowed_parts_runtime_graph runtime_graph)
set(allowed_parts_runtime_cpu runtime_graph runtime_cpu)
set(allowed_parts_runtime_cuda runtime_graph runtime_cuda)
set(allowed_parts_runtime_mpi runtime runtime_mpi)
set(allowed_parts_runtime_nccl runtime runtime_cuda runtime_mpi runtime_nccl)

# The runtime part of a path below runtime/ ("runtime/cpu/layer.h" → runtime_cpu,
# "runtime/engine.h" → runtime).
function(runtime_part path out)
  if(path MATCHES "^runtime/([^/]+)/")
    set(${out} runtime_${CMAKE_MATCH_1} PARENT_SCOPE)
  else()
    set(${out} runtime PARENT_SCOPE)
  endif()
endfunction()

set(violations "")
foreach(module IN LISTS modules)
  file(GLOB_RECURSE sources RELATIVE ${SOURCE_DIR}
       ${SOURCE_DIR}/${module}/*.h ${SOURCE_DIR}/${module}/*.cpp ${SOURCE_DIR}/${module}/*.cu)
  foreach(source IN LISTS sources)
    set(part "")
    if(module STREQUAL "runtime")
      runtime_part("${source}" part)
      if(NOT part IN_LIST runtime_parts)
        string(REGEX REPLACE "^(runtime/[^/]+)/.*" "\\1" folder "${source}")
        list(APPEND violations
             "${source}: ${folder}/ has no rule in tests/layering.cmake's runtime sub-libraries")
        continue()
      endif()
    endif()
    file(STRINGS ${SOURCE_DIR}/${source} includes REGEX "^#include \"")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^#include \"([^/\"]+)/.*" "\\1" target "${line}")
      if(target STREQUAL line OR NOT target IN_LIST modules)
        continue()  # a same-folder or non-module include
      endif()
      if(NOT target IN_LIST allowed_${module})
        list(APPEND violations "${source}: ${module}/ may not include ${target}/ (${line})")
        continue()
      endif()
      if(NOT part)
        continue()
      endif()
      # runtime/'s sub-library rule (above).
      if(DEFINED allowed_modules_${part} AND NOT target IN_LIST allowed_modules_${part})
        string(REGEX REPLACE "^runtime_" "runtime/" folder "${part}")
        list(APPEND violations "${source}: ${folder}/ may not include ${target}/ (${line})")
      elseif(target STREQUAL "runtime")
        string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" path "${line}")
        runtime_part("${path}" included)
        if(NOT included IN_LIST allowed_parts_${part})
          string(REGEX REPLACE "^runtime_" "runtime/" folder "${part}")
          string(REGEX REPLACE "^runtime_" "runtime/" other "${included}")
          if(included STREQUAL "runtime")
            set(other "runtime/*.h (the engine)")
          else()
            set(other "${other}/")
          endif()
          list(APPEND violations "${source}: ${folder}/ may not include ${other} (${line})")
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()

# The runtime front end: ddpscope-run (cli/ddpscope_run_main.cpp, cli/run_worker.*) drives the
# runtime, so it alone in cli/ may include runtime/; it links no simulator, so of api/ it includes
# only the headers of api_flags (the DDP and model settings, the bucket plan), never the
# simulator's verbs. The other cli/ sources never include runtime/.
set(runtime_front_end_sources cli/ddpscope_run_main.cpp cli/run_worker.h cli/run_worker.cpp)
set(api_flags_headers api/ddp_flags.h api/model_settings.h api/model_request.h
                      api/buckets_request.h)
file(GLOB_RECURSE sources RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/cli/*.h ${SOURCE_DIR}/cli/*.cpp)
foreach(source IN LISTS sources)
  file(STRINGS ${SOURCE_DIR}/${source} includes REGEX "^#include \"(runtime|api)/")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" path "${line}")
    if(source IN_LIST runtime_front_end_sources)
      if(path MATCHES "^api/" AND NOT path IN_LIST api_flags_headers)
        list(APPEND violations
             "${source}: ddpscope-run may include only api_flags' headers of api/ (${line})")
      endif()
    elseif(path MATCHES "^runtime/")
      list(APPEND violations
           "${source}: only ddpscope-run's sources may include runtime/ in cli/ (${line})")
    endif()
  endforeach()
endforeach()

# One request layer: the front ends (cli/, gui/, python/) turn named settings into a simulation,
# a sweep or a plan through api/ (parseSimulationRequest / runSimulation, parseSweepRequest /
# runSweepRequest, parsePlanRequest / runPlanRequest), never by calling the engine's entry points.
foreach(module gui cli python)
  file(GLOB_RECURSE sources RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/${module}/*.h
       ${SOURCE_DIR}/${module}/*.cpp)
  foreach(source IN LISTS sources)
    file(STRINGS ${SOURCE_DIR}/${source} calls
         REGEX "sim::(simulate|simulateDdp|simulateDataParallel|runSweep|runPlan)\\(")
    foreach(line IN LISTS calls)
      string(STRIP "${line}" line)
      list(APPEND violations "${source}: a front end calls the engine, not api/ (${line})")
    endforeach()
  endforeach()
endforeach()

# The GUI builds its requests from typed values (api::SimulationChoice, simulationSettings,
# sweepSettings in api/simulation_request.h): it never spells a flag into named settings.
file(GLOB_RECURSE sources RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/gui/*.h ${SOURCE_DIR}/gui/*.cpp)
foreach(source IN LISTS sources)
  file(STRINGS ${SOURCE_DIR}/${source} spelled REGEX "\\.set\\(\"[a-z][a-z0-9-]*\"")
  foreach(line IN LISTS spelled)
    string(STRIP "${line}" line)
    list(APPEND violations "${source}: the GUI spells a flag, which only api/ may (${line})")
  endforeach()
endforeach()

# Public headers of the core: no Qt, CUDA, NCCL, MPI or the full nlohmann header. The backend
# folders runtime/cuda, runtime/nccl, runtime/mpi are where those libraries are allowed.
foreach(module base io models ddp traces sim api runtime)
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
message(STATUS "layering: every include follows docs/design.md §2's module and runtime rules")
