/* file.h: whole-file reading, the only file input helper the layers share. */
#pragma once

#include <stddef.h>

/* Read a whole file (NUL-terminated copy). 0 or a negative errno. */
int file_read_all(const char *path, char **ret_data, size_t *ret_len);
