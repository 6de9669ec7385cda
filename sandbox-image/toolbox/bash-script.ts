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

// Runs a background job: the command in the wrapper's process group (the job's group, whose
// id is the pid file), its combined output in the job directory, and a watchdog that kills the
// group when the output passes the cap. The watchdog watches the group, not the command's
// shell: what the command left running (`server &`) still writes to the log after the shell
// exited. So the watchdog runs in a group of its own (job control on for that one `&`), where
// kill -0 on the job's group does not count itself; it ends when the job's group is empty. It is
// a shell loop, not node, so it costs no memory worth mentioning and outlives the toolbox.
//
// Arguments: $1 job directory, $2 cap in bytes, $3 prelude, then the prelude's arguments.
export const BASH_JOB_WRAPPER = String.raw`
__chamvi_dir=$1; __chamvi_cap=$2; __chamvi_prelude=$3
shift 3
__chamvi_group=$$
set -m
(
  while kill -0 -- "-$__chamvi_group" 2>/dev/null; do
    __chamvi_size=$(stat -c %s -- "$__chamvi_dir/output.log" 2>/dev/null || echo 0)
    if [ "$__chamvi_size" -gt "$__chamvi_cap" ]; then
      : > "$__chamvi_dir/capped"
      kill -KILL -- "-$__chamvi_group"
      break
    fi
    sleep 0.2
  done
) < /dev/null > /dev/null 2>&1 &
set +m
bash -c "$__chamvi_prelude" chamvi-job "$@" > "$__chamvi_dir/output.log" 2>&1 < /dev/null &
wait "$!"
echo $? > "$__chamvi_dir/exit.tmp" && mv -f -- "$__chamvi_dir/exit.tmp" "$__chamvi_dir/exit"
`;
