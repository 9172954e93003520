"""CHEF and H2H plans as hls4ml projects (issue 37): `archi build --strategy chef|h2h`.

    stages    the plan cut into one sub-network per FPGA (per visit), and its streams
    torch_net each sub-network as a torch.fx module hls4ml's PyTorch front end converts
    config     hls4ml's configuration: precision, reuse factor from the IP, part, io_stream
    project   the conversion and the written project
    manifest  manifest.json: IPs per FPGA, layer mapping, schedule, DRAM budget, links
    build     the writers hook
    csim      the projects compiled with hls4ml's C simulation and chained, for the tests

torch and hls4ml are imported only here, never by `import archipelago`.
"""
