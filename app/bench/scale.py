"""placeholder"""

def add_parser(bench):
    pass
