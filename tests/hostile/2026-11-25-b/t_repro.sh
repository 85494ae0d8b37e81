#!/bin/bash
# Second, independent reproduction of findings 1-3 on fresh homes in /tmp/hostile/t2/r (ports 17530-17533).
S=/tmp/hostile/t2; P=${PLAIT:-/tmp/hostile/plait}; W=$S/r
$S/setup2.sh $W 17530 A C H D >/dev/null; $P init --home $W/X --name X >/dev/null
$P list add Groceries --home $W/C >/dev/null; $P add Groceries milk --home $W/C >/dev/null
$P agent --home $W/A --listen 127.0.0.1:17530 --no-discovery --api-listen "" > $W/A.log 2>&1 & APID=$!; echo "A agent pid $APID"; sleep 1.5
$P sync --home $W/C --peer 127.0.0.1:17530 --no-discovery
echo "### F-succession: A unpairs D; H's statement names D's certificate as H's successor"
$P unpair $($P id --home $W/D | tail -1) --home $W/A
W=$W python3 $S/t2_succession.py 17530 new:D | grep -v '<-'
$P peers --home $W/A | grep -E 'succeeded|EJGW|device' | cut -c1-140
$P list add FromD --home $W/D >/dev/null; $P sync --home $W/D --peer 127.0.0.1:17530 --no-discovery; echo "D sync rc=$?"; $P lists --home $W/A
echo "### F-supersede: H's baseline marks C's timeline superseded, backed by a made-up companion timeline of C's certificate"
TC=$($P status --home $W/C | awk '/^timeline/{print $2}')
W=$W python3 $S/t2_timeline.py 17530 $TC bl_supersede_companion | grep -E 'case|Close'
$P add Groceries "eggs (C, after the attack)" --home $W/C >/dev/null
$P sync --home $W/C --peer 127.0.0.1:17530 --no-discovery; echo "C sync rc=$?"
echo "A shows:"; $P show Groceries --home $W/A
$P peers --home $W/A | grep -A1 "$($P id --home $W/C | tail -1 | cut -c1-7)" | cut -c1-200
echo "C's peers says of A:"; $P peers --home $W/C | grep "$($P id --home $W/A | tail -1 | cut -c1-7)" | cut -c1-200
echo "### F-lamport: unsigned timeline, list.delete v1 at Lamport 2^62-1"
AP=17530 W=$W python3 $S/t3_lamport.py Groceries 4611686018427387903 | tail -1
sleep 1; for n in A A C C; do echo "$n: $($P add Groceries "x-$n" --home $W/$n 2>&1 | tail -1)"; $P sync --home $W/C --peer 127.0.0.1:17530 --no-discovery >/dev/null 2>&1; done
kill $APID; wait $APID 2>/dev/null; echo "A agent stopped"
