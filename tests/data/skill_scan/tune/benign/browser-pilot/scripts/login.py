"""Open a browser for the user to log in, then save the session's cookies as a storage state."""

import sys

from playwright.sync_api import sync_playwright


def main(url: str) -> None:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(headless=False)
        context = browser.new_context()
        page = context.new_page()
        page.goto(url)
        input("Log in in the browser window, then press Enter here... ")
        context.storage_state(path="state.json")  # cookies and local storage of this session
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1])
