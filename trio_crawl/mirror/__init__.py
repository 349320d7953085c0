"""``--mirror DIR`` / ``mirror=``: the offline copy of a site, as one package.

The rules are pure and live apart from the I/O, so they can be tested
without a disk or an event loop (``tests/test_layering.py`` holds them to
core's rules, module by module):

    layout.py   pure: where a URL's body goes, the relative link between files
    links.py    pure: ``--convert-links`` for one page or stylesheet
    files.py    blocking disk I/O: write a file inside the directory, never
                through a symlink
    convert.py  blocking: ``--convert-links`` over the whole directory
    output.py   the trio side: a crawl's pages handed to the disk side
    visits.py   the visits a mirror keeps in ``DIR/.trio-crawl/``: run
                twice, a mirror is a recrawl (``docs/manual/mirror.md``)

Nothing here is imported by a crawl without a mirror (the engine and the
command line import ``output`` where the option is chosen), so this file
imports none of its modules.
"""
