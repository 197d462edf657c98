# Embed the fleet pool's Lua scripts in C: the prelude (the modules LIB
# names, by path, joined in its order) and each operation's body as
# byte arrays (link.c joins them at run time), the operations' names, and
# a version: the start of the SHA1 of all of it, which names the library
# of Redis functions built from them.
#   cmake -DOUT=file.c -DDIR=lua -DLIB=lua/lib/base.lua,.../consts.lua,...
#         -DSCRIPTS=abort,acquire,... -P embed.cmake

# hex_array(var file...): the files' bytes, one after the other, as the
# body of a C array ending in 0x00, in var; their length in var_len.
function(hex_array var)
  set(hex "")
  foreach(file ${ARGN})
    file(READ ${file} part HEX)
    string(APPEND hex "${part}")
  endforeach()
  string(LENGTH "${hex}" n)
  math(EXPR bytes "${n} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
  string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" hex "${hex}")
  set(${var} "${hex}0x00" PARENT_SCOPE)
  set(${var}_len ${bytes} PARENT_SCOPE)
endfunction()

string(REPLACE "," ";" SCRIPTS "${SCRIPTS}")
string(REPLACE "," ";" LIB "${LIB}")
set(lib_files "")
set(all "")
foreach(module ${LIB})
  list(APPEND lib_files ${module})
  file(READ ${module} text)
  string(APPEND all "${text}")
endforeach()
set(c "/* Generated from src/fleet/lua/ by src/fleet/embed.cmake: do not edit. */\n")
string(APPEND c "#include <stddef.h>\n\n")
hex_array(prelude ${lib_files})
string(APPEND c "const char fl_lua_prelude[] = {\n${prelude}};\n")
string(APPEND c "const size_t fl_lua_prelude_len = ${prelude_len};\n\n")
set(table "")
set(lens "")
set(names "")
foreach(name ${SCRIPTS})
  hex_array(body ${DIR}/${name}.lua)
  string(APPEND c "static const char body_${name}[] = {\n${body}};\n")
  string(APPEND table "  body_${name},\n")
  string(APPEND lens "  ${body_len},\n")
  string(APPEND names "  \"${name}\",\n")
  file(READ ${DIR}/${name}.lua text)
  string(APPEND all "${name}\n${text}")
endforeach()
string(SHA1 version "${all}")
string(SUBSTRING "${version}" 0 16 version)
string(APPEND c "\nconst char *const fl_lua_body[] = {\n${table}};\n")
string(APPEND c "const size_t fl_lua_body_len[] = {\n${lens}};\n")
string(APPEND c "const char *const fl_lua_name[] = {\n${names}};\n")
string(APPEND c "const char fl_lua_version[] = \"${version}\";\n")
# Written each time, so that the file is newer than what it is made from
# (a file left as it was would have make run this again for every target).
file(WRITE ${OUT} "${c}")
