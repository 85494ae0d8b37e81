#!/bin/bash
# u1_paths.sh: homes on paths with spaces, unicode, quotes, a newline-free but very long name (socket path
# over 108 bytes, no XDG_RUNTIME_DIR): init, pair, agent, add through the agent, sync, doctor, show.
. $(dirname $(readlink -f $0))/common.sh
D="$W/u1"; rm -rf "$D"; mkdir -p "$D"
LONG=$(printf 'ü%.0s' $(seq 1 40))
for name in "sp ace" "ünï cødé 📋" "quo'te\"s" "$LONG"; do
  A="$D/$name/a"; B="$D/$name/b"; mkdir -p "$D/$name"
  echo "=== home: $A ($(printf %s "$A" | wc -c) bytes)"
  mkhome "$A" a || { echo "init failed"; continue; }; mkhome "$B" b
  pl "$A" pair --trust $(pl "$B" id | tail -1) --address 127.0.0.1:18181 >/dev/null; pl "$B" pair --trust $(pl "$A" id | tail -1) --address 127.0.0.1:18180 >/dev/null
  env -u XDG_RUNTIME_DIR $P agent --home "$A" --config "$A/config.toml" --no-discovery --listen 127.0.0.1:18180 > "$D/a.log" 2>&1 & AP=$!
  env -u XDG_RUNTIME_DIR $P agent --home "$B" --config "$B/config.toml" --no-discovery --listen 127.0.0.1:18181 > "$D/b.log" 2>&1 & BP=$!
  sleep 1.5
  env -u XDG_RUNTIME_DIR $P list add "L $name" --home "$A" --config "$A/config.toml" 2>&1 | cut -c1-200
  env -u XDG_RUNTIME_DIR $P add "L $name" "item $name" --home "$A" --config "$A/config.toml" 2>&1 | cut -c1-200
  sleep 1; echo "b sees: $(items "$B" | tr '\n' '|')"
  pl "$A" doctor 2>&1 | grep -E 'FAIL|WARN' | cut -c1-250
  stopagent $AP; stopagent $BP
  grep -E 'warning|error' "$D/a.log" "$D/b.log" | cut -c1-250
done
