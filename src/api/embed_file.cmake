# cmake -DIN=file -DOUT=file.cc -DNAME=symbol -P embed_file.cmake: writes a .cc defining
#   extern const char NAME[]; extern const unsigned long NAME_size;
# holding the bytes of IN (NUL-terminated), so the text is part of the binary.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" hex_len)
math(EXPR size "${hex_len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
file(WRITE "${OUT}" "// Generated from ${IN}; do not edit.\n"
  "namespace falcon::api {\n"
  "extern const char ${NAME}[] = {${bytes} '\\0'};\n"
  "extern const unsigned long ${NAME}_size = ${size};\n"
  "}  // namespace falcon::api\n")
