# ddpscope_embed_files(OUTPUT <cpp> NAMESPACE <ns> FUNCTION <fn> FILES <f>...)
#
# Generates a .cpp that defines
#   std::span<const ddpscope::EmbeddedFile> <ns>::<fn>();
# listing {name (file stem), text} for each file, sorted by name. The text is embedded as
# raw string literal chunks, so the data works from any directory. Re-generated when a
# file changes.
set(_DDPSCOPE_EMBED_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/embed_files_script.cmake")

function(ddpscope_embed_files)
  cmake_parse_arguments(E "" "OUTPUT;NAMESPACE;FUNCTION" "FILES" ${ARGN})
  list(SORT E_FILES)
  string(REPLACE ";" "|" files_arg "${E_FILES}")
  add_custom_command(
    OUTPUT "${E_OUTPUT}"
    COMMAND ${CMAKE_COMMAND} "-DOUTPUT=${E_OUTPUT}" "-DNAMESPACE=${E_NAMESPACE}"
            "-DFUNCTION=${E_FUNCTION}" "-DFILES=${files_arg}" -P "${_DDPSCOPE_EMBED_SCRIPT}"
    DEPENDS ${E_FILES} "${_DDPSCOPE_EMBED_SCRIPT}"
    COMMENT "Embedding ${E_FUNCTION} data files"
    VERBATIM)
  # The chunks of one file concatenate into one literal, longer than the 65,536 characters the
  # standard asks compilers to support (clang's -Wpedantic says so; gcc and clang take it).
  set_source_files_properties("${E_OUTPUT}" PROPERTIES COMPILE_OPTIONS -Wno-overlength-strings)
endfunction()
