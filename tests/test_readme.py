"""Every `tandem …` command the documentation shows parses as the CLI parses it: a renamed
command or option, or a value of the wrong type, fails here rather than in a reader's shell.
Commands in code blocks parse whole (options, values, arguments); a command quoted in prose names
a command and options that exist."""

from __future__ import annotations

import re
import shlex

import pytest
import typer

from tandem.cli import app
from tests.conftest import ROOT

DOCUMENTS = [ROOT / "README.md", ROOT / "docker" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CLI = typer.main.get_command(app)
# In a code block: `tandem …` or `.venv/bin/tandem …`, up to a pipe.
BLOCK_COMMAND = re.compile(r"^\s*(?:\.venv/bin/)?tandem\s+(.*)$")
# In prose: `tandem run --lateness`, `tandem validate [QUERY ...] [--microbatch]`.
QUOTED = re.compile(r"`(?:\.venv/bin/)?tandem ((?:--master \S+ )?[a-z][a-z-]*)([^`]*)`")


def block_commands() -> list[tuple[str, list[str]]]:
    found = []
    for document in DOCUMENTS:
        for block in re.findall(r"^```[a-z]*\n(.*?)^```", document.read_text(), re.M | re.S):
            for line in block.splitlines():
                command = BLOCK_COMMAND.match(line.split(" | ")[0])
                if command:
                    found.append((f"{document.name}: {line.strip()}",
                                  shlex.split(command[1], comments=True)))
    return found


def quoted_commands() -> list[tuple[str, str, list[str]]]:
    found = []
    for document in DOCUMENTS:
        for command, rest in QUOTED.findall(document.read_text()):
            name = command.split()[-1]
            options = re.findall(r"--[a-z][a-z-]*", rest)
            found.append((f"{document.name}: tandem {command}{rest}", name, options))
    return found


def parse(args: list[str]) -> None:
    """What `tandem ARGS` parses before it runs anything: the group's options, the command,
    and the command's options and arguments (their types included)."""
    with CLI.make_context("tandem", list(args)) as context:
        # The group's options end at the command's name; what follows is the command's.
        rest = context.args
        name, command, rest = CLI.resolve_command(context, args[len(args) - len(rest) - 1:])
        command.make_context(name, rest, parent=context)


BLOCKS = block_commands()
QUOTES = quoted_commands()


def test_the_documents_show_commands():
    assert len(BLOCKS) >= 30 and len(QUOTES) >= 20  # the patterns still find them


@pytest.mark.parametrize("where, args", BLOCKS, ids=[b[0] for b in BLOCKS])
def test_every_command_of_a_code_block_parses(where, args):
    parse(args)  # the test's id names the line; the error, what does not parse


@pytest.mark.parametrize("where, name, options", QUOTES, ids=[q[0] for q in QUOTES])
def test_every_command_quoted_in_prose_exists_with_its_options(where, name, options):
    command = CLI.commands.get(name)
    assert command is not None, f"{where}: no command {name!r}"
    known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
    assert not set(options) - known, f"{where}: no option {set(options) - known} of {name}"
