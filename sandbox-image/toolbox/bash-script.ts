// The bash prelude every command runs in. State (exported variables and the working
// directory) lives in a file under the toolbox home rather than in a long-lived shell, so it
// survives separate `call` processes and a restarted session alike, and every command can
// still get its own process group that a timeout kills as a whole.
//
// Arguments: $1 state file, $2 workspace root, $3 cwd override ('' for none), $4 'save' to
// keep the state on exit, $5 the command.
export const BASH_PRELUDE = String.raw`
__chamvi_state=$1; __chamvi_root=$2; __chamvi_cwd=$3; __chamvi_keep=$4; __chamvi_command=$5
shift 5
cd -- "$__chamvi_root" 2>/dev/null
if [ -f "$__chamvi_state" ]; then . "$__chamvi_state" >/dev/null 2>&1; fi
if [ -n "$__chamvi_cwd" ]; then
  cd -- "$__chamvi_cwd" || exit 1
fi
if [ "$__chamvi_keep" = save ]; then
  # An EXIT trap keeps the state even when the command calls exit; a command that sets its
  # own EXIT trap replaces this one, and that call's state is not kept (documented). Builtins
  # only: the toolbox renames the file into place after the shell exits (no mv process).
  __chamvi_save() {
    {
      printf '# %s\n' "$PWD"
      export -p
      printf 'cd -- %q 2>/dev/null\n' "$PWD"
    } > "$__chamvi_state.next.$$" 2>/dev/null
  }
  trap __chamvi_save EXIT
fi
eval "$__chamvi_command"
`;

// Whether a process group has a live process: `__chamvi_group_lives PGID` answers by its status,
// 0 when a live process was found, 1 when no process at all (not even a zombie) has the group id,
// 2 when only zombies were seen. kill -0 counts zombies, and under a PID 1 that does not reap
// orphans (node, a custom image) a killed or exited process stays one for good, so liveness is
// read from /proc: a process whose stat names the group (field 5) and whose state (field 3) is
// not X, nor Z with one thread left (field 20): /proc shows the main thread's state, so a process
// whose main thread exited while another runs shows Z too. The command name (field 2) may hold
// spaces, parentheses and newlines, so the whole file is read (not up to a newline) and the
// fields are taken after its last `) `. Builtins only, and the live process found last time (at
// first the group's leader) is read first, so a poll costs one read while that process lives; a
// whole scan of /proc costs milliseconds. The scan is not atomic: a process that forks its
// successor and exits (a relay) can be missed, so 2 is only a hint, never proof the group ended.
// Without /proc (not Linux) kill -0 is all there is. Not String.raw: \${ is bash's here.
export const BASH_GROUP_LIVES = `
__chamvi_lives_in() {
  local __chamvi_in=$2 __chamvi_line=
  read -r -d '' __chamvi_line < "/proc/$1/stat"
  [ -n "$__chamvi_line" ] || return 1
  set -- \${__chamvi_line##*) }
  [ "$3" = "$__chamvi_in" ] && [ "$1" != X ] && { [ "$1" != Z ] || [ "\${18}" -gt 1 ]; }
}
__chamvi_group_lives() {
  local __chamvi_file
  kill -0 -- "-$1" 2>/dev/null || return 1
  [ -r /proc/self/stat ] || return 0
  __chamvi_lives_in "\${__chamvi_seen:-$1}" "$1" 2>/dev/null && return 0
  for __chamvi_file in /proc/[0-9]*; do
    if __chamvi_lives_in "\${__chamvi_file#/proc/}" "$1" 2>/dev/null; then
      __chamvi_seen=\${__chamvi_file#/proc/}
      return 0
    fi
  done
  return 2
}
`;

// Who writes a file, as file-writers.ts finds them in the toolbox, for the watchdog (builtins
// only): `__chamvi_writes PID FILE` succeeds when the process holds the file open for writing, a
// descriptor that leads to the same file (-ef: device and inode, so a renamed or deleted log too)
// opened to write (fdinfo's flags, access mode 1 or 2); a process whose main thread exited lists
// its descriptors under its threads only. `__chamvi_log_writers FILE` scans every process but this
// one into __chamvi_writers and succeeds when it found one.
// Like the group's scan, not atomic: a relay can be missed. Not String.raw: \${ is bash's here.
export const BASH_LOG_WRITERS = `
__chamvi_writes() {
  local __chamvi_fd __chamvi_key __chamvi_value
  local -a __chamvi_fds=(/proc/$1/fd/*)
  [ -e "\${__chamvi_fds[0]}" ] || __chamvi_fds=(/proc/$1/task/*/fd/*)
  for __chamvi_fd in "\${__chamvi_fds[@]}"; do
    [ "$__chamvi_fd" -ef "$2" ] || continue
    while read -r __chamvi_key __chamvi_value; do
      if [ "$__chamvi_key" = flags: ]; then
        case $(( 8#$__chamvi_value & 3 )) in 1|2) return 0 ;; esac
        break
      fi
    done < "\${__chamvi_fd%/fd/*}/fdinfo/\${__chamvi_fd##*/}"
  done 2>/dev/null
  return 1
}
__chamvi_log_writers() {
  local __chamvi_process
  __chamvi_writers=()
  for __chamvi_process in /proc/[0-9]*; do
    __chamvi_process=\${__chamvi_process#/proc/}
    [ "$__chamvi_process" = "$BASHPID" ] && continue
    __chamvi_writes "$__chamvi_process" "$1" && __chamvi_writers+=("$__chamvi_process")
  done
  [ \${#__chamvi_writers[@]} -gt 0 ]
}
`;

// Records a process as `PID START` in a file (`__chamvi_record_process PID FILE`), START being when
// it started (field 22 of /proc/PID/stat, clock ticks since boot): a pid names the same process
// only while the process with that pid has that start time (job-group-identity.ts). The wrapper
// records its watchdog so: while the watchdog lives, in the job's session, the job's pid cannot be
// reused. The command name may hold spaces, so the fields are taken after its last `) `. Builtins
// only. Not String.raw: \${ is bash's here.
export const BASH_RECORD_PROCESS = `
__chamvi_record_process() {
  local __chamvi_line=
  read -r -d '' __chamvi_line < "/proc/$1/stat"
  [ -n "$__chamvi_line" ] || return 1
  set -- "$1" "$2" \${__chamvi_line##*) }
  [ -n "\${22}" ] && echo "$1 \${22}" > "$2"
}
`;

/**
 * Polls (0.2 s apart) of the watchdog that must in a row see only zombies in the job's group
 * before it takes the group as ended: about 5 s, far longer than a relay is missed by chance.
 */
export const ZOMBIE_ONLY_POLLS = 25;

/**
 * Polls of the watchdog that must in a row see the job's log keep its size, once the group ended,
 * before it exits: enough for a daemon that forks itself away (`setsid`, a double fork) to have
 * settled and written, not for one that stays silent longer (see BASH_JOB_WRAPPER).
 */
export const NO_WRITER_POLLS = 5;

// Runs a background job: the command in the wrapper's process group (the job's group, whose
// id is the pid file), its combined output in the job directory, and a watchdog that kills the
// job when the output passes the cap. The watchdog watches the group, not the command's
// shell: what the command left running (`server &`) still writes to the log after the shell
// exited. So the watchdog runs in a group of its own (job control on for that one `&`), where
// the job's group does not count it; when no process is left in the job's group (kill -0 fails),
// or only zombies were seen for ZOMBIE_ONLY_POLLS polls in a row (under a PID 1 that does not
// reap, they stay), it writes `group-ended`. Until then the job's pid cannot be reused: it is the
// watchdog's session id (the wrapper started the session). After `group-ended` it may be, so
// nothing signals the group then. Nor once the group may have ended unseen (the watchdog killed,
// `kill -9 -1`): the wrapper records the watchdog's pid and start time in `watchdog`, the toolbox
// the wrapper's start time in `pid-start`, and the group is signalled only while one of them is
// still the process it recorded (job-group-identity.ts). A process that left the group (`setsid`, `set -m`) but writes
// the job's log is still the job's: at the cap the watchdog kills every writer of the log, by
// pid right after finding it. After `group-ended` it goes on watching while the log grows, and
// exits once its size stayed the same for NO_WRITER_POLLS polls in a row, whatever still holds it
// open: a daemon that inherited the log and writes nothing (`setsid sleep 600 &`) would otherwise
// keep a loop forking twice every 0.2 s for as long as it lives. The price: what is silent that
// long after the group ended and loud later is capped by no watchdog (bash_kill still stops it).
// The size is read by the log's path, and no descriptor scan is needed for it. It is a shell loop, not node,
// so it costs no memory worth mentioning and outlives the toolbox.
//
// Arguments: $1 job directory, $2 cap in bytes, $3 prelude, then the prelude's arguments.
export const BASH_JOB_WRAPPER = String.raw`
__chamvi_dir=$1; __chamvi_cap=$2; __chamvi_prelude=$3
shift 3
__chamvi_group=$$
${BASH_GROUP_LIVES}
${BASH_LOG_WRITERS}
${BASH_RECORD_PROCESS}
set -m
(
  __chamvi_log=$__chamvi_dir/output.log
  __chamvi_zombie_polls=0
  __chamvi_quiet_polls=0
  __chamvi_last_size=
  __chamvi_ended=
  while :; do
    if [ -z "$__chamvi_ended" ]; then
      __chamvi_group_lives "$__chamvi_group"
      case $? in
        0) __chamvi_zombie_polls=0 ;;
        1) __chamvi_ended=1 ;;
        *)
          __chamvi_zombie_polls=$((__chamvi_zombie_polls + 1))
          [ "$__chamvi_zombie_polls" -ge ${ZOMBIE_ONLY_POLLS} ] && __chamvi_ended=1
          ;;
      esac
      [ -n "$__chamvi_ended" ] && : > "$__chamvi_dir/group-ended"
    fi
    __chamvi_size=$(stat -c %s -- "$__chamvi_log" 2>/dev/null || echo 0)
    if [ -n "$__chamvi_ended" ]; then
      if [ "$__chamvi_size" != "$__chamvi_last_size" ]; then
        __chamvi_quiet_polls=0
      else
        __chamvi_quiet_polls=$((__chamvi_quiet_polls + 1))
        [ "$__chamvi_quiet_polls" -ge ${NO_WRITER_POLLS} ] && break
      fi
    fi
    __chamvi_last_size=$__chamvi_size
    if [ "$__chamvi_size" -gt "$__chamvi_cap" ]; then
      : > "$__chamvi_dir/capped"
      [ -z "$__chamvi_ended" ] && kill -KILL -- "-$__chamvi_group"
      __chamvi_log_writers "$__chamvi_log" && kill -KILL "${'$'}{__chamvi_writers[@]}"
    fi
    sleep 0.2
  done
) < /dev/null > /dev/null 2>&1 &
__chamvi_record_process "$!" "$__chamvi_dir/watchdog" 2>/dev/null
set +m
bash -c "$__chamvi_prelude" chamvi-job "$@" > "$__chamvi_dir/output.log" 2>&1 < /dev/null &
wait "$!"
echo $? > "$__chamvi_dir/exit.tmp" && mv -f -- "$__chamvi_dir/exit.tmp" "$__chamvi_dir/exit"
`;
