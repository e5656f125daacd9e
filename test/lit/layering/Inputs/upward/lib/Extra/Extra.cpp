// a library nobody put in the table
