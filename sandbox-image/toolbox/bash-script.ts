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
// not Z or X. The command name (field 2) may hold spaces and parentheses, so the fields are read
// after its last `) `. Builtins only, and the live process found last time (at first the group's
// leader) is read first, so a poll costs one read while that process lives; a whole scan of /proc
// costs milliseconds. The scan is not atomic: a process that forks its successor and exits
// (a relay) can be missed, so 2 is only a hint, never proof the group ended. Without /proc (not
// Linux) kill -0 is all there is. Not String.raw: \${ is bash's here.
export const BASH_GROUP_LIVES = `
__chamvi_lives_in() {
  local __chamvi_in=$2 __chamvi_line
  read -r __chamvi_line < "/proc/$1/stat" || return 1
  set -- \${__chamvi_line##*) }
  [ "$3" = "$__chamvi_in" ] && [ "$1" != Z ] && [ "$1" != X ]
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

/**
 * Polls (0.2 s apart) of the watchdog that must in a row see only zombies in the job's group
 * before it takes the group as ended: about 5 s, far longer than a relay is missed by chance.
 */
export const ZOMBIE_ONLY_POLLS = 25;

// Runs a background job: the command in the wrapper's process group (the job's group, whose
// id is the pid file), its combined output in the job directory, and a watchdog that kills the
// group when the output passes the cap. The watchdog watches the group, not the command's
// shell: what the command left running (`server &`) still writes to the log after the shell
// exited. So the watchdog runs in a group of its own (job control on for that one `&`), where
// the job's group does not count it; when no process is left in the job's group (kill -0 fails),
// or only zombies were seen for ZOMBIE_ONLY_POLLS polls in a row (under a PID 1 that does not
// reap, they stay), it writes `group-ended` and exits. Until then the job's pid cannot be
// reused: it is the watchdog's session id (the wrapper started the session). After
// `group-ended` it may be, so nothing signals the group then. It is a shell loop, not node, so it costs no memory worth mentioning and
// outlives the toolbox.
//
// Arguments: $1 job directory, $2 cap in bytes, $3 prelude, then the prelude's arguments.
export const BASH_JOB_WRAPPER = String.raw`
__chamvi_dir=$1; __chamvi_cap=$2; __chamvi_prelude=$3
shift 3
__chamvi_group=$$
${BASH_GROUP_LIVES}
set -m
(
  __chamvi_zombie_polls=0
  while :; do
    __chamvi_group_lives "$__chamvi_group"
    case $? in
      0) __chamvi_zombie_polls=0 ;;
      1) break ;;
      *)
        __chamvi_zombie_polls=$((__chamvi_zombie_polls + 1))
        [ "$__chamvi_zombie_polls" -ge ${ZOMBIE_ONLY_POLLS} ] && break
        ;;
    esac
    __chamvi_size=$(stat -c %s -- "$__chamvi_dir/output.log" 2>/dev/null || echo 0)
    if [ "$__chamvi_size" -gt "$__chamvi_cap" ]; then
      : > "$__chamvi_dir/capped"
      kill -KILL -- "-$__chamvi_group"
    fi
    sleep 0.2
  done
  : > "$__chamvi_dir/group-ended"
) < /dev/null > /dev/null 2>&1 &
set +m
bash -c "$__chamvi_prelude" chamvi-job "$@" > "$__chamvi_dir/output.log" 2>&1 < /dev/null &
wait "$!"
echo $? > "$__chamvi_dir/exit.tmp" && mv -f -- "$__chamvi_dir/exit.tmp" "$__chamvi_dir/exit"
`;
