#!/usr/bin/env bash
# Summarise a pull request: title, author, size and changed files.
set -euo pipefail
number="${1:?usage: pr_summary.sh <number>}"
gh pr view "$number" --json title,author,additions,deletions,files \
  | jq -r '"\(.title) by \(.author.login): +\(.additions) -\(.deletions)", (.files[].path)'
