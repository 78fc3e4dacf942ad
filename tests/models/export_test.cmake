# models/export/torch_export.py test (tests/models/export_test.py), label unit. It needs a
# Python with torch and torchvision (Debian: python3-torch python3-torchvision); without them
# the script exits 77 and ctest reports it as skipped. DDPSCOPE_TORCH_PYTHON picks the
# interpreter: the first of /usr/bin/python3 and the python3 on PATH that imports torch.
if(NOT DEFINED DDPSCOPE_TORCH_PYTHON)
  find_program(_ddpscope_path_python3 NAMES python3)
  set(_ddpscope_torch_python "")
  foreach(candidate /usr/bin/python3 ${_ddpscope_path_python3})
    if(NOT _ddpscope_torch_python AND EXISTS "${candidate}")
      execute_process(COMMAND "${candidate}" -c "import torch" RESULT_VARIABLE _rc
                      OUTPUT_QUIET ERROR_QUIET)
      if(_rc EQUAL 0)
        set(_ddpscope_torch_python "${candidate}")
      endif()
    endif()
  endforeach()
  if(NOT _ddpscope_torch_python)
    set(_ddpscope_torch_python "${_ddpscope_path_python3}")
  endif()
  set(DDPSCOPE_TORCH_PYTHON "${_ddpscope_torch_python}" CACHE FILEPATH
      "Python interpreter with torch for the exporter test")
endif()
if(DDPSCOPE_TORCH_PYTHON)
  add_test(NAME models_torch_export
           COMMAND "${DDPSCOPE_TORCH_PYTHON}" "${CMAKE_CURRENT_SOURCE_DIR}/export_test.py"
                   $<TARGET_FILE:ddpscope>)
  set_tests_properties(models_torch_export PROPERTIES LABELS "unit" SKIP_RETURN_CODE 77
                       TIMEOUT 300)
  # Exported forward FLOPs against torch.utils.flop_counter.FlopCounterMode, per module: needs
  # PyTorch >= 2.1 (Debian's 1.13 has no FlopCounterMode: skipped); point DDPSCOPE_TORCH_PYTHON
  # at a newer torch (with torchvision and transformers where installed) to run it.
  add_test(NAME models_torch_export_flops
           COMMAND "${DDPSCOPE_TORCH_PYTHON}" "${CMAKE_CURRENT_SOURCE_DIR}/export_test.py" --flops
                   $<TARGET_FILE:ddpscope>)
  set_tests_properties(models_torch_export_flops PROPERTIES LABELS "unit" SKIP_RETURN_CODE 77
                       TIMEOUT 300)
endif()
