# Sourced by the bench scripts: retrylens at commit $BASE, built into $dir/base from a
# temporary worktree in $dir, which remove_base takes away again.
build_base() {
  git worktree add --detach "$dir/base-src" "$BASE" >/dev/null 2>&1
  (cd "$dir/base-src" && go build -o "$dir/base" ./cmd/retrylens)
}
remove_base() {
  if [ -d "$dir/base-src" ]; then git worktree remove --force "$dir/base-src" >/dev/null 2>&1; fi
}
