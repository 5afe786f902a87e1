class ScriptError(Exception):
    pass

def run_code(text, workspace=None):
    raise NotImplementedError

def run_file(path, workspace=None):
    raise NotImplementedError
