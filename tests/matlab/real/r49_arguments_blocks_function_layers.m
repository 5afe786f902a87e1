% Pattern: a repository's Transolver layer for physics meshes, a function file whose functions
% all validate their inputs with arguments blocks (positional arguments with
% {mustBePositive, mustBeInteger}, name-value arguments args.Name (1,1) string = "" and
% args.IncludeTemperature (1,1) logical = false): identityLayer inputs, a 1-by-1 convolution
% and a softmax giving slice weights, two functionLayers made by local functions (several named
% inputs, Formattable, Acceleratable, handles to local functions that use stripdims and
% pagemtimes), a selfAttentionLayer over the slices, an optional temperature branch,
% dlnetwork(layers, Initialize=false), addLayers/connectLayers to the functionLayers' named
% inputs, and the whole network returned wrapped in networkLayer.
% Source: GitHub repository.
% MATLAB: called with its three sizes the function returns a networkLayer around an
% uninitialised dlnetwork of 8 layers, with no error (its input sizes are left to the network
% that will hold it); without them the arguments block stops it ("Not enough input arguments").
% Expect: exit 2 "--set hiddenSize=VALUE"
% Expect-with: --set hiddenSize=64 --set numSlices=32 --set numHeads=8 -> exit 0 "8 layers"
function layer = transolverLayer(hiddenSize, numSlices, numHeads, args)
arguments
    hiddenSize (1,1) {mustBePositive, mustBeInteger}
    numSlices (1,1) {mustBePositive, mustBeInteger}
    numHeads (1,1) {mustBePositive, mustBeInteger}
    args.Name (1,1) string = ""
    args.IncludeTemperature (1,1) logical = false
end

layers = [
    identityLayer(Name="X")
    convolution1dLayer(1, numSlices)];
if args.IncludeTemperature
    layers = [layers
        functionLayer(@(x, temp) x ./ max(temp, 0.01), InputNames=["x", "temp"], Acceleratable=true, Name="temp")];
end
layers = [layers
    softmaxLayer(Name="sliceWeights")
    sliceRepresentationLayer(Name="sliceRepresentation")
    selfAttentionLayer(numHeads, hiddenSize)
    nodeRepresentationLayer(Name="nodeRepresentation")
    convolution1dLayer(1, hiddenSize)];

net = dlnetwork(layers, Initialize=false);
net = addLayers(net, identityLayer(Name="mask"));
net = connectLayers(net, "mask", "sliceRepresentation/mask");
net = connectLayers(net, "X", "sliceRepresentation/X");
net = connectLayers(net, "sliceWeights", "nodeRepresentation/W");

if args.IncludeTemperature
    % a learned temperature per point
    net = addLayers(net, [convolution1dLayer(1, numSlices, Name="tempProjectionIn"); geluLayer; ...
        convolution1dLayer(1, 1); geluLayer(); ...
        convolution1dLayer(1, 1, WeightLearnRateFactor=0, Weights=1, Bias=0.5, Name="tempProjection")]);
    net = connectLayers(net, "X", "tempProjectionIn");
    net = connectLayers(net, "tempProjection", "temp/temp");
end
layer = networkLayer(net, Name=args.Name);
end

function layer = sliceRepresentationLayer(args)
arguments
    args.Name (1,1) string = ""
end
layer = functionLayer(@sliceLinear, ...
    InputNames=["W", "X", "mask"], ...
    Formattable=true, ...
    Acceleratable=true, ...
    Name=args.Name);
end

function Z = sliceLinear(W, X, mask)
W = W .* mask;
W = stripdims(W, "CSB");
Z = pagemtimes(W, stripdims(X));
Z = Z ./ (sum(W, 2) + 1e-6);
Z = dlarray(Z, "SCB");
end

function layer = nodeRepresentationLayer(args)
arguments
    args.Name (1,1) string = ""
end
layer = functionLayer(@nodeLinear, ...
    Formattable=true, ...
    Acceleratable=true, ...
    InputNames=["Z", "W"], ...
    Name=args.Name);
end

function Z = nodeLinear(Z, W)
Z = pagemtimes(stripdims(W), stripdims(Z));
Z = dlarray(Z, "SCB");
end
