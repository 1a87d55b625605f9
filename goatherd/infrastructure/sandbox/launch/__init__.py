"""Code that runs inside the launcher process, before and around the command.

Every module here imports only the standard library and its siblings (by
relative import): the launcher runs as ``python -I -S -B`` with this
directory's parent appended to ``sys.path``, without goatherd, its
dependencies or site-packages. The host imports the same modules as
``goatherd.infrastructure.sandbox.launch.*`` to probe the kernel and to manage
cgroup leaves.
"""

__all__: list[str] = []
