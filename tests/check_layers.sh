#!/bin/sh
# The layering rule of STYLE.md, checked on every test run: src/core and src/life (the
# job lifecycle both drivers share) include no I/O, clock, thread or randomness header,
# and no layer includes one to its right.
set -u
src=${1:-.}/src
fail=0
bad=$(grep -nE '#include *<(stdio|time|pthread|threads|sys/[a-z_]+|netinet/[a-z_]+|arpa/[a-z_]+|unistd|fcntl|dirent|signal|poll|syslog)\.h>' "$src"/core/*.[ch] "$src"/life/*.[ch])
if [ -n "$bad" ]; then
  echo "src/core and src/life must stay pure (no I/O, clock, thread or system headers):"
  echo "$bad"
  fail=1
fi
bad=$(grep -nE '\b(rand|srand|random|time|clock_gettime|gettimeofday|getenv|printf|fprintf|fopen)\s*\(' "$src"/core/*.c "$src"/life/*.c)
if [ -n "$bad" ]; then
  echo "src/core or src/life calls a clock, libc randomness, the environment or stdio:"
  echo "$bad"
  fail=1
fi
# layers: util <- core <- life; core <- spec; life, spec <- sim; util <- store, net;
# core, life, spec, store <- server; core, life, spec, net <- agent; core, spec, store, net,
# server <- kube; cli on top of all
check() {
  layer=$1; shift
  for banned in "$@"; do
    hits=$(grep -lE "#include \"$banned/" "$src/$layer"/*.[ch] 2>/dev/null)
    if [ -n "$hits" ]; then
      echo "src/$layer may not include src/$banned: $hits"
      fail=1
    fi
  done
}
check util core life spec sim store net server agent kube cli
check core life spec sim store net server agent kube cli
check life spec sim store net server agent kube cli
check spec life sim store net server agent kube cli
check sim store net server agent kube cli
check store core life spec sim net server agent kube cli
check net core life spec sim store server agent kube cli
check server sim net agent kube cli
check agent sim store server kube cli
check kube sim agent cli
[ $fail -eq 0 ] && echo "layers ok"
exit $fail
