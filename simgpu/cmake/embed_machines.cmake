# Writes the machine presets (simgpu/machines/<name>.yaml) into a C++ table, so that
# SIMGPU_MACHINE reads exactly the files that are also installed for CHAMELEON_TOPOLOGY.
# Inputs: DIR (folder of the YAML files), NAMES (,-separated), OUT (the .inc to write).
string(REPLACE "," ";" NAMES "${NAMES}")
set(body "// Generated from simgpu/machines/*.yaml by embed_machines.cmake. Do not edit.\n")
foreach(name IN LISTS NAMES)
  file(READ ${DIR}/${name}.yaml text)
  string(FIND "${text}" ")simgpu_machine\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${name}.yaml contains the raw-string delimiter")
  endif()
  string(APPEND body "{\"${name}\", R\"simgpu_machine(${text})simgpu_machine\"},\n")
endforeach()
file(WRITE ${OUT}.tmp "${body}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
