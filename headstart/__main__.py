"""``python -m headstart`` runs the command line."""

if __name__ == "__main__":
    from . import _done_with_interrupts, _interrupted_start, _leave_stopped

    # the command line's modules load here (the package's own imports are guarded in its
    # __init__); main() handles every Ctrl-C from its first line to its last, the ones
    # before and after end here
    try:
        from .cli.main import main

        code = main()
    except KeyboardInterrupt:
        raise _interrupted_start() from None
    finally:
        _done_with_interrupts()   # (also after argparse's SystemExit: --help, --version, usage errors)
    if code in (130, 143):        # stopped by Ctrl-C / SIGTERM: no teardown (see _leave_stopped)
        _leave_stopped(code)
    raise SystemExit(code)
