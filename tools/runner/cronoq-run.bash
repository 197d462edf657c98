# bash completion for cronoq-run. The options come from the runner's own
# --help, so that the completion never lags behind them.
_cronoq_run() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  case $prev in
  --joblog | --json | --results | --arg-file | -a | ::::)
    COMPREPLY=($(compgen -f -- "$cur"))
    return
    ;;
  --summary)
    COMPREPLY=($(compgen -W 'failed full none' -- "$cur"))
    return
    ;;
  -j | --jobs)
    COMPREPLY=($(compgen -W '0 50% 100% +1 -1' -- "$cur"))
    return
    ;;
  --halt)
    COMPREPLY=($(compgen -W 'never soon,fail= now,fail= fail=' -- "$cur"))
    return
    ;;
  esac
  if [[ $cur == -* ]]; then
    local opts
    # Long options, and the short ones that have none (-N, -X).
    opts=$("${COMP_WORDS[0]}" --help 2>/dev/null |
      sed -n 's/^ *\(-[a-zA-Z], \)\{0,1\}\(--[a-z][a-z-]*\).*/\2/p
        s/^  \(-[a-zA-Z]\) .*/\1/p')
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -F _cronoq_run cronoq-run
