# The layering check catches planted includes (the ctest layering_catches_planted): writes a small
# tree under WORK_DIR holding allowed includes and, one per file, an include each runtime or front
# end rule of tests/layering.cmake forbids; runs layering.cmake on it; and passes only if the check fails,
# names every planted include with the rule it breaks, and reports none of the allowed files.
# Run as cmake -DLAYERING=.../layering.cmake -DWORK_DIR=... -P this file.
cmake_minimum_required(VERSION 3.25)
set(tree ${WORK_DIR}/layering_planted)
file(REMOVE_RECURSE ${tree})

# file|its includes (comma-separated)|the text its report must contain ("" = allowed: no report)
set(cases
  "runtime/cuda/planted_cpu.cpp|runtime/cpu/layer.h|runtime/cuda/ may not include runtime/cpu/"
  "runtime/cpu/planted_cuda.h|runtime/cuda/cuda_model.h|runtime/cpu/ may not include runtime/cuda/"
  "runtime/graph/planted_cpu.h|runtime/cpu/cpu_model.h|runtime/graph/ may not include runtime/cpu/"
  "runtime/graph/planted_ddp.h|ddp/reducer.h|runtime/graph/ may not include ddp/"
  "runtime/cuda/planted_engine.cpp|runtime/engine.h|runtime/cuda/ may not include runtime/*.h"
  "runtime/cpu/planted_nccl.cpp|runtime/nccl/nccl_backend.h|runtime/cpu/ may not include runtime/nccl/"
  "runtime/planted_cuda.cpp|runtime/cuda/cuda_context.h|runtime/ may not include runtime/cuda/"
  "runtime/newpart/planted.cpp|base/status.h|runtime/newpart/ has no rule"
  "runtime/graph/allowed.h|base/status.h,models/model_spec.h,runtime/graph/tensor.h|"
  "runtime/cpu/allowed.cpp|runtime/graph/trainable_model.h,runtime/cpu/layer.h|"
  "runtime/cuda/allowed.cpp|runtime/graph/model_graph.h,runtime/cuda/gemm.h,traces/timeline.h|"
  "runtime/allowed.cpp|runtime/graph/trainable_model.h,runtime/cpu/cpu_model.h,runtime/comm.h|"
  "runtime/nccl/allowed.cpp|runtime/training.h,runtime/cuda/cuda_model.h,runtime/mpi/mpi_communicator.h|"
  "cli/planted_engine.cpp|sim/engine/plan.h|cli/ may not include sim/"
  "cli/planted_ddp.cpp|ddp/ddp_settings.h|cli/ may not include ddp/"
  "cli/planted_runtime.cpp|runtime/training.h|only ddpscope-run's sources may include runtime/"
  "cli/run_worker.cpp|api/plan_request.h|ddpscope-run may include only api_flags' headers"
  "gui/planted_models.cpp|models/zoo.h|gui/ may not include models/"
  "python/planted_topo.cpp|sim/topo/topo_matrix.h|python/ may not include sim/"
  "cli/allowed.cpp|api/plan_request.h,base/status.h,io/file_output.h,traces/timeline.h|"
  "cli/ddpscope_run_main.cpp|runtime/training.h,api/ddp_flags.h,api/buckets_request.h|"
  "gui/allowed.cpp|api/simulation_request.h,traces/timeline.h,gui/model/whatif.h|")

foreach(case IN LISTS cases)
  string(REPLACE "|" ";" fields "${case}")
  list(GET fields 0 file)
  list(GET fields 1 includes)
  string(REPLACE "," ";" includes "${includes}")
  set(text "")
  foreach(include IN LISTS includes)
    string(APPEND text "#include \"${include}\"\n")
  endforeach()
  file(WRITE ${tree}/${file} "${text}")
endforeach()

execute_process(COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${tree} -P ${LAYERING}
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(report "${out}${err}")
set(failures "")
if(result EQUAL 0)
  list(APPEND failures "layering.cmake passed a tree with planted includes")
endif()
foreach(case IN LISTS cases)
  string(REPLACE "|" ";" fields "${case}")
  list(LENGTH fields n)
  list(GET fields 0 file)
  set(expected "")
  if(n GREATER 2)
    list(GET fields 2 expected)
  endif()
  string(FIND "${report}" "${file}:" at)
  if(expected STREQUAL "")
    if(NOT at EQUAL -1)
      list(APPEND failures "${file}: allowed, yet reported")
    endif()
  else()
    string(FIND "${report}" "${file}: ${expected}" found)
    if(found EQUAL -1)
      list(APPEND failures "${file}: no report containing \"${file}: ${expected}\"")
    endif()
  endif()
endforeach()
file(REMOVE_RECURSE ${tree})
if(failures)
  list(JOIN failures "\n  " text)
  message(FATAL_ERROR "layering_catches_planted:\n  ${text}\nlayering.cmake said:\n${report}")
endif()
message(STATUS "layering_catches_planted: every planted include is reported, no allowed one")
