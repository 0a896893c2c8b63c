# Turn controld/openapi.json into a C source defining openapi_json / openapi_json_len (api_openapi.c).
# Usage: cmake -DIN=<openapi.json> -DOUT=<generated .c> -P embed_openapi.cmake
if(NOT IN OR NOT OUT)
  message(FATAL_ERROR "embed_openapi.cmake: IN and OUT must be set")
endif()
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
file(WRITE "${OUT}.tmp" "/* generated from controld/openapi.json by embed_openapi.cmake; do not edit */\n#include <stddef.h>\n\nconst unsigned char openapi_json[] = {${hex} 0x00};\nconst size_t openapi_json_len = ${len};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
