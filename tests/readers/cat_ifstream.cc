// cat_ifstream.cc - copy a file to stdout through std::ifstream, as C++
// programs read their inputs: for the interposer tests
#include <fstream>
#include <iostream>

int main (int argc, char **argv)
{
    if (argc != 2) {
        std::cerr << "usage: cat_ifstream FILE\n";
        return 1;
    }
    std::ifstream in (argv[1], std::ios::binary);
    if (!in) {
        std::cerr << argv[1] << ": cannot open\n";
        return 1;
    }
    std::cout << in.rdbuf ();
    return std::cout.good () ? 0 : 1;
}
