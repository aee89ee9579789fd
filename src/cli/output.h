/* output.h: terminal output helpers of the CLI. */
#pragma once

#include <stdio.h>

/* Print a table: rows of cells separated by '\t' in `text`, columns aligned. */
void out_table(FILE *f, const char *text);
